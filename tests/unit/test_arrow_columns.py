"""`rocketstore.arrow.read(columns=...)`: the batches of a projection are the full read's batches with only
those columns, in the order asked, compiled and through the numpy twin, on the golden store and a written
one of several files; the work of the columns not asked is not done; a name that is not a column errors."""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import rocketstore.arrow
import rocketstore.sql
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import InvalidArgumentError
from rocketstore.format.message import decode_record, encode_message
from rocketstore.scan import columnar, direct
from rocketstore.scan.projection import CORE, Projection, projected
from rocketstore.scan.records import COLUMNS, to_record_batch
from tests.conftest import copy_golden_store

GOLDEN_OPTIONS = {"commitlogFileSize": 65536, "consumeQueueFileEntries": 100, "indexHashSlots": 100,
                  "indexMaxEntries": 400}

PROJECTIONS = [
    ["commitLogOffset"],
    ["topic"],
    ["body"],
    ["tags", "queueId"],
    ["msgId", "bornHost", "storeHost", "broker"],
    list(COLUMNS),
    list(reversed(COLUMNS)),
    [],
]


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_golden_store(tmp_path_factory.mktemp("golden") / "store")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three topics x three queues over many 16 KiB commitlog files; tags, keys, two born hosts (one IPv6)."""
    root = tmp_path_factory.mktemp("written") / "store"
    config = StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=10, index_hash_slots=16,
                         index_max_entries=9)
    with MessageStore.open(root, config) as store:
        for i in range(600):
            host = "[::1]:7" if i == 7 else f"10.0.0.{i % 3}:{9000 + i}"
            assert store.put(Message(("T1", "T2", "T3")[i % 3], f"body {i}".encode() * (1 + i % 9),
                                     queue_id=(i // 3) % 3, tags=("TagA", "TagB", None)[i % 3],
                                     keys=[f"k{i}", "shared"], born_host=host)).ok
    return root


@pytest.fixture(params=["compiled", "twin"])
def route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way a read builds its columns: the compiled walk where it is, and the numpy and Arrow twin
    (the message path, no record_columns)."""
    if request.param == "compiled":
        if not direct.AVAILABLE:
            pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
    else:
        monkeypatch.setattr(direct, "AVAILABLE", False)
        monkeypatch.setattr(columnar, "_record_columns", None)
    return str(request.param)


def _options(root: Path, **more: str) -> dict[str, Any]:
    return {**(GOLDEN_OPTIONS if root.parent.name.startswith("golden") else {}), **more}


def _batches(root: Path, options: dict[str, Any], columns: list[str] | None = None,
             filters: list[tuple[Any, ...]] | None = None) -> list[pa.RecordBatch]:
    return list(rocketstore.arrow.read(str(root), options, filters=filters or (), columns=columns))


@pytest.mark.parametrize("scan", [None, "queues", "commitlog"])
@pytest.mark.parametrize("which", ["golden", "written"])
def test_a_projections_batches_are_the_full_reads_columns(request, route, which, scan):
    root = request.getfixturevalue(which)
    options = _options(root) if scan is None else _options(root, scan=scan)
    full = _batches(root, options)
    assert sum(b.num_rows for b in full) >= 40
    for columns in PROJECTIONS:
        got = _batches(root, options, columns)
        assert [b.schema.names for b in got] == [columns] * len(full), columns
        assert [b.num_rows for b in got] == [b.num_rows for b in full], columns
        for mine, whole in zip(got, full, strict=True):
            assert mine.equals(whole.select(columns)), columns


@pytest.mark.parametrize("which", ["golden", "written"])
def test_a_projection_with_filters_on_columns_not_asked_keeps_the_same_rows(request, route, which):
    root = request.getfixturevalue(which)
    full = pa.Table.from_batches(_batches(root, _options(root)))
    topic = full.column("topic")[0].as_py()
    middle = sorted(full.column("storeTimestamp").to_pylist())[len(full) // 2]
    filters: list[tuple[str, ...]] = [("topic", "=", topic), ("storeTimestamp", ">=", middle),
                                      ("tags", "is not null")]
    want = pa.Table.from_batches(_batches(root, _options(root), filters=filters))
    assert 0 < len(want) < len(full)
    got = pa.Table.from_batches(_batches(root, _options(root), ["body", "queueOffset"], filters),
                                schema=Projection.of(["body", "queueOffset"]).schema)  # type: ignore[union-attr]
    assert got.equals(want.select(["body", "queueOffset"]))


def test_unknown_repeated_or_string_columns_are_refused_naming_them(written):
    with pytest.raises(InvalidArgumentError, match=r"unknown column 'bodyy'; the columns are topic, queueId, .*broker"):
        rocketstore.arrow.read(str(written), columns=["topic", "bodyy"])
    with pytest.raises(InvalidArgumentError, match="column 'topic' asked for twice"):
        rocketstore.arrow.read(str(written), columns=["topic", "body", "topic"])
    with pytest.raises(InvalidArgumentError, match="list of column names, not the string 'topic'"):
        rocketstore.arrow.read(str(written), columns="topic")
    assert issubclass(InvalidArgumentError, ValueError)


def test_the_reader_schema_is_the_projection(written):
    reader = rocketstore.arrow.read(str(written), columns=["storeSize", "topic"])
    assert reader.schema.names == ["storeSize", "topic"]
    assert reader.schema.field("storeSize").type == pa.int32()
    assert reader.read_all().num_rows == 600


SMALL_PARTITIONS = {"bytesPerPartition": "8192"}
"""Many partitions, so that a twin read (one batch a partition) has several batches too."""


def _v6_batches(root: Path) -> int:
    """How many batches of the full read hold a row with an IPv6 born host."""
    return sum(any(h.startswith("[") for h in b.column("bornHost").to_pylist())
               for b in rocketstore.arrow.read(str(root), SMALL_PARTITIONS))


def test_a_read_without_a_properties_column_never_parses_properties(written, route, monkeypatch):
    """No properties parse (record_columns where compiled, the twin's split otherwise) and no body slices
    unless a column needs them, the batch holding an IPv6 host (which both routes decline) included."""
    batches = sum(1 for _ in rocketstore.arrow.read(str(written), SMALL_PARTITIONS))
    v6 = _v6_batches(written)
    assert 0 < v6 < batches
    calls: list[str] = []

    def counting(name: str, real: Any) -> Any:
        def call(*args: Any) -> Any:
            calls.append(name)
            return real(*args)
        return call

    if columnar._record_columns is not None:
        monkeypatch.setattr(columnar, "_record_columns", counting("record_columns", columnar._record_columns))
    monkeypatch.setattr(columnar, "_properties", counting("properties", columnar._properties))
    monkeypatch.setattr(columnar, "_slices", counting("slices", columnar._slices))
    projected_read = rocketstore.arrow.read(str(written), SMALL_PARTITIONS, columns=["queueId", "storeSize", "flag"])
    assert sum(b.num_rows for b in projected_read) == 600
    assert "properties" not in calls
    assert "record_columns" not in calls
    assert calls.count("slices") == batches - v6  # the topic's, once a batch the numpy route takes; no body
    calls.clear()
    assert sum(b.num_rows for b in rocketstore.arrow.read(str(written), SMALL_PARTITIONS, columns=["tags"])) == 600
    if route == "compiled":
        # once a batch, and again for the IPv6 one on the message path, whose row path makes it
        assert calls.count("record_columns") == batches + v6 and "properties" not in calls
    else:
        assert calls.count("properties") == batches - v6


def _record(topic: bytes, *, born_ip: bytes = b"\x7f\0\0\1", version: int = 1) -> bytes:
    return encode_message(topic=topic, body=b"a body", properties=b"TAGS\x01a\x02KEYS\x01k1 k2", version=version,
                          born_ip=born_ip, store_ip=b"\xc0\xa8\0\1", queue_id=3, flag=0, queue_offset=7,
                          phy_offset=1024, sys_flag=0, born_timestamp=1_700_000_000_000, born_port=50_000,
                          store_timestamp=1_700_000_000_123, store_port=10911)


def _built_inside(projection: Projection | None, messages: list[Any]) -> pa.RecordBatch:
    """The batch `record_batch` makes of `messages` inside a read with `projection`."""
    def make() -> Iterator[pa.RecordBatch]:
        yield columnar.record_batch(messages, "b")
    return next(projected(make(), projection))


@pytest.mark.parametrize("odd", ["none", "ipv6 born host", "a topic not UTF-8", "record v2"])
@pytest.mark.parametrize("columns", PROJECTIONS, ids=lambda c: ",".join(c[:3]) or "nothing")
def test_records_the_numpy_route_does_not_take_give_the_reference_columns(route, columns, odd):
    """Each projection of a batch holding a record the numpy route hands on equals the row path's batch."""
    plain = _record(b"T")
    other = {"none": plain, "ipv6 born host": _record(b"T", born_ip=bytes(range(16))),
             "a topic not UTF-8": _record(b"T\xff"), "record v2": _record(b"T2", version=2)}[odd]
    messages = [decode_record(raw) for raw in (plain, other, plain)]
    want = to_record_batch(messages, "b").select(columns)
    assert _built_inside(Projection.of(columns), messages).equals(want)


def test_a_projection_builds_what_the_read_core_and_the_filters_need():
    projection = Projection.of(["body"], [("tags", "=", "TagA")])
    assert projection is not None
    assert projection.columns == ("body",)
    assert projection.built == CORE | {"body", "tags"}
    assert Projection.of(None) is None


@pytest.mark.parametrize("seed", range(12))
def test_a_projection_of_a_damaged_store_reads_the_rows_the_full_read_reads(written, route, tmp_path, seed):
    """Bytes overwritten inside a record (its lengths among them): the numpy route declines what
    record_columns declines, so a projection keeps exactly the full read's rows."""
    root = tmp_path / "store"
    shutil.copytree(written, root)
    rows = rocketstore.arrow.read(str(root), columns=["commitLogOffset", "storeSize"]).read_all().to_pylist()
    rng = random.Random(seed)
    file_size = 16 * 1024
    newest = max(r["commitLogOffset"] for r in rows) // file_size
    victim = rng.choice([r for r in rows if r["commitLogOffset"] // file_size < newest])
    # the body length, or a byte after it: the body, the topic length, the topic, the properties length
    at = victim["commitLogOffset"] + rng.choice([84, 85, 86, 87, 88 + rng.randrange(victim["storeSize"] - 88)])
    path = root / "commitlog" / f"{at - at % file_size:020d}"
    data = bytearray(path.read_bytes())
    for k in range(at % file_size, min(at % file_size + rng.choice([1, 2, 4]), file_size)):
        data[k] = rng.choice([0, 0xFF, rng.randrange(256)])
    path.write_bytes(bytes(data))
    for scan in (None, "commitlog"):
        options = {} if scan is None else {"scan": scan}
        full = _batches(root, options)
        for columns in (["topic"], ["queueOffset", "body"], ["tags"]):
            got = pa.Table.from_batches(_batches(root, options, columns), schema=full[0].select(columns).schema)
            assert got.equals(pa.Table.from_batches([b.select(columns) for b in full])), (scan, columns)


QUERIES = [
    "SELECT topic, count(*) AS n FROM messages GROUP BY topic",
    "SELECT topic, count(*) AS n, sum(storeSize) AS bytes FROM messages WHERE tags = 'TagA' GROUP BY topic",
    "SELECT queueId, queueOffset, msgId FROM messages WHERE topic = 'T2' AND bornHost LIKE '10.%'",
    "SELECT body FROM messages WHERE queueOffset BETWEEN 3 AND 9 AND keys IS NOT NULL",
    "SELECT count(*) AS n FROM messages",
    "SELECT * FROM messages WHERE queueId = 1",
    "SELECT storeHost, max(storeTimestamp) AS last FROM messages WHERE topic <> 'T1' GROUP BY storeHost",
]


@pytest.mark.parametrize("which", ["golden", "written"])
def test_sql_answers_the_same_with_and_without_the_projection(request, route, which, monkeypatch):
    root = request.getfixturevalue(which)
    con = rocketstore.sql.connect(str(root), _options(root))
    projected_answers = [con.sql(sql).to_arrow_table() for sql in QUERIES]
    asked = []
    real = rocketstore.arrow.read

    def every_column(path: Any, options: Any = None, filters: Any = (), columns: Any = None) -> pa.RecordBatchReader:
        asked.append(columns)
        return real(path, options, filters)

    monkeypatch.setattr(rocketstore.arrow, "read", every_column)
    full = rocketstore.sql.connect(str(root), _options(root))
    for sql, answer in zip(QUERIES, projected_answers, strict=True):
        want = full.sql(sql).to_arrow_table()
        assert answer.schema == want.schema, sql
        assert sorted(map(repr, answer.to_pylist())) == sorted(map(repr, want.to_pylist())), sql
    # what each scan read with the projection: the columns DuckDB asks (bornHost for its own LIKE) and
    # those the filter it hands on tests
    assert asked[:4] == [["topic"], ["topic", "storeSize", "tags"], ["queueId", "queueOffset", "msgId", "bornHost",
                                                                     "topic"], ["body", "queueOffset", "keys"]], asked


def test_a_projection_reaches_the_read_ahead_thread(written, route, monkeypatch):
    """With `readAhead` the batches are made in another thread: it builds the projection's columns only."""
    options = {**SMALL_PARTITIONS, "readAhead": "2"}
    full = _batches(written, options)
    calls: list[str] = []
    real_properties = columnar._properties
    monkeypatch.setattr(columnar, "_properties", lambda *a: calls.append("properties") or real_properties(*a))
    if columnar._record_columns is not None:
        real = columnar._record_columns
        monkeypatch.setattr(columnar, "_record_columns", lambda *a: calls.append("record_columns") or real(*a))
    columns = ["storeTimestamp", "topic"]
    got = _batches(written, options, columns)
    assert all(b.equals(f.select(columns)) for b, f in zip(got, full, strict=True))
    assert calls == []
