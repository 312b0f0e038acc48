"""A read through `rocketstore.arrow` builds its arrays from buffers and imports no pandas.

pyarrow imports pandas (when installed) on the first `pa.array`, `pa.scalar`, `to_numpy` or compute call
given a Python value: a quarter of a second, which made a process's first read of a 1M-message store three
times slower than its second. Each read here runs in a fresh interpreter, with an import hook that fails on
pandas, for the compiled kernels and their numpy twins, over the read's kinds: log order, queue order,
every pushed filter kind, projections, several stores, read threads. `scan.arrays` is what the readers
use instead; its conversions are checked against pyarrow's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.scan.arrays import FALSE, NULL_BOOL, bools, from_numpy, from_values, numpy_view, scalar
from tests.conftest import REPO_ROOT, copy_golden_store

GOLDEN_OPTIONS = {"commitlogFileSize": "65536", "consumeQueueFileEntries": "100", "indexHashSlots": "100",
                  "indexMaxEntries": "400"}

READS: list[tuple[dict[str, str], list[Any], list[str] | None]] = [
    ({}, [], None),
    ({"readThreads": "2"}, [], None),
    ({"scan": "queues"}, [["queueOffset", "<=", 5]], None),
    ({}, [["topic", "=", "T2"], ["queueId", "in", [0, 2, None]]], None),
    ({}, [["storeTimestamp", ">", 0], ["commitLogOffset", ">=", 4096], ["queueOffset", "<", 40]], None),
    ({}, [["tags", "in", ["TagA", "TagB"]], ["topic", "not in", ["T3"]]], None),
    ({}, [["uniqKey", "is null"], ["bornHost", "!=", "10.0.0.1:9001"]], None),
    ({}, [["queueId", "not in", [1, None]]], None),
    ({}, [], ["keys", "properties", "tags", "uniqKey", "msgId", "storeSize"]),
    ({}, [], ["body"]),
]

_READER = """
import json, sys
class NoPandas:
    def find_spec(self, name, path, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise AssertionError("pandas imported")
sys.meta_path.insert(0, NoPandas())
import rocketstore.arrow
paths, reads = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for options, filters, columns in reads:
    rows = sum(b.num_rows for b in rocketstore.arrow.read(paths, options, filters=filters, columns=columns))
    print(rows)
assert "pandas" not in sys.modules
"""


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str]:
    """Two written stores of three topics x three queues over many small files (tags, keys, IPv4 hosts),
    and the msgId of a message of the second."""
    roots = []
    config = StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=10, index_hash_slots=16,
                         index_max_entries=9)
    for n in range(2):
        root = tmp_path_factory.mktemp(f"store{n}") / "store"
        with MessageStore.open(root, config) as store:
            for i in range(300):
                assert store.put(Message(("T1", "T2", "T3")[i % 3], f"body {i}".encode() * (1 + i % 9),
                                         queue_id=(i // 3) % 3, tags=("TagA", "TagB", None)[i % 3],
                                         keys=[f"k{i}", "shared"], born_host=f"10.0.0.{i % 3}:{9000 + i}")).ok
            msg_id = store.get("T2", 1, 3).messages[0].msg_id
        roots.append(str(root))
    return roots, msg_id


def _read_fresh(paths: list[str], reads: list[Any], pure: bool) -> list[int]:
    env = dict(os.environ, ROCKETSTORE_PURE_PYTHON="1" if pure else "")
    if not pure:
        env.pop("ROCKETSTORE_PURE_PYTHON")
    done = subprocess.run([sys.executable, "-c", _READER, json.dumps(paths), json.dumps(reads)], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [int(line) for line in done.stdout.split()]


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "numpy-twin"])
def test_reads_import_no_pandas(stores: tuple[list[str], str], pure: bool) -> None:
    paths, msg_id = stores
    counts = _read_fresh(paths, [list(r) for r in READS] + [[{}, [["msgId", "=", msg_id]], None]], pure)
    assert counts[:2] == [600, 600]
    assert counts[2] == 2 * 9 * 6  # queue order: offsets 0-5 of every queue of both stores
    assert all(0 < c < 600 for c in counts[3:7]), counts
    assert counts[7] == 0  # NOT IN (..., NULL) is never true
    assert counts[8:] == [600, 600, 2]  # the two stores hold the same messages at the same offsets


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "numpy-twin"])
def test_golden_read_imports_no_pandas(tmp_path: Path, pure: bool) -> None:
    golden = copy_golden_store(tmp_path / "store")
    assert _read_fresh([str(golden)], [[GOLDEN_OPTIONS, [], None]], pure)[0] > 0


def test_from_numpy_is_pyarrows_array() -> None:
    rng = np.random.default_rng(3)
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_):
        for n in (0, 1, 7, 8, 9, 1000):
            values = rng.integers(-100, 100, n).astype(dtype)
            valid = rng.random(n) < 0.7
            assert from_numpy(values).equals(pa.array(values))
            assert from_numpy(values, valid=valid).equals(pa.array(values, mask=~valid))
            assert from_numpy(values[::3]).equals(pa.array(values[::3]))


def test_from_values_and_scalars() -> None:
    for kind, items in ((pa.string(), ["", "a", "é€", "x" * 300]), (pa.binary(), [b"", b"\x00\xff"]),
                        (pa.int64(), [0, -1, 2**63 - 1, -2**63]), (pa.int32(), [5, -7]), (pa.string(), [])):
        assert from_values(items, kind).equals(pa.array(items, type=kind))
        for item in items:
            assert scalar(item, kind).equals(pa.scalar(item, type=kind))
    with pytest.raises(TypeError, match="map"):
        from_values([], pa.map_(pa.string(), pa.string()))
    assert FALSE.equals(pa.scalar(False)) and NULL_BOOL.equals(pa.scalar(None, pa.bool_()))


def test_numpy_views_and_bools_follow_slices_and_nulls() -> None:
    ints = pa.array(list(range(50)), type=pa.int64())
    for start in (0, 1, 9, 17):
        assert numpy_view(ints.slice(start, 20)).tolist() == list(range(start, start + 20))
    flags = pa.array([i % 3 == 0 if i % 5 else None for i in range(70)], type=pa.bool_())
    for start in (0, 1, 7, 8, 13):
        part = flags.slice(start, 40)
        assert bools(part).tolist() == [bool(v) for v in part.to_pylist()]
    assert bools(pc.equal(pa.array(["a", "b", None]), "a")).tolist() == [True, False, False]
