"""rocketstore._speedups is built by the install, and each of its functions gives exactly what its
pure-Python twin gives, on generated inputs, garbage included."""
# Every property test runs with deadline=None: no test asserts a timing (the machine is shared and noisy).

from __future__ import annotations

import dataclasses
import gc
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, StoreConfig, native
from rocketstore.errors import IndexDamagedError
from rocketstore.format import javahash
from rocketstore.format import message as fm
from rocketstore.format.index import IndexHeader
from rocketstore.format.properties import _decode_properties_reference, decode_properties_py
from rocketstore.log import entry_run, index_service
from rocketstore.log.index_file import KEY, IndexFile
from rocketstore.results import PutResult, PutStatus
from rocketstore.store import append_run
from rocketstore.store import prepare as prepare_module
from rocketstore.store import write_path as store_module
from rocketstore.store.prepare import Prepared, Preparer, checked_topic

# The install (pip install -e . / ./dev) builds the module wherever a C compiler is found, as on every
# machine the suite runs on; without it this import fails and so does every test here.
from rocketstore import _speedups  # isort: skip

any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=40)  # lone surrogates too
texts = st.one_of(st.text(st.characters(max_codepoint=127), max_size=40), any_text)


def test_the_store_uses_the_compiled_functions_unless_told_not_to():
    if os.environ.get(native.PURE_PYTHON_VARIABLE, "") in ("", "0"):
        assert native.speedups is _speedups
        assert javahash.java_hash is _speedups.java_hash
    code = "from rocketstore import native; from rocketstore.format import javahash as j; " \
           "print(native.speedups is None, j.java_hash is j.java_hash_py)"
    env = {**os.environ, native.PURE_PYTHON_VARIABLE: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_the_module_was_compiled_with_the_python_declarations():
    """_layout.h is generated from the Python declarations at build time; a module built before a
    declaration changed (or from a hand-edited header) fails here."""
    from rocketstore.store import c_layout

    assert _speedups.layout() == c_layout.compiled_with()
    assert c_layout.compiled_with()["prepared"] == Prepared._fields
    header = c_layout.header()
    assert "#define REC_SYSFLAG_POS 36" in header and "P_DELAY_LEVEL = 19," in header


def test_known_hashes():
    assert _speedups.java_hash("TagA") == 2598919
    assert _speedups.java_hash("polygenelubricants") == -(2**31)
    assert _speedups.java_hash("主题#键") == 634204136
    assert _speedups.java_hash("T#😀") == 4308978  # two UTF-16 units
    assert _speedups.java_hash_concat("TopicTest#", "KEY1") == -1656969516
    with pytest.raises(TypeError, match="expected str"):
        _speedups.java_hash(b"TagA")


@settings(deadline=None)
@given(texts, texts)
def test_java_hash_twins(prefix, text):
    assert _speedups.java_hash(text) == javahash.java_hash_py(text)
    assert _speedups.java_hash_concat(prefix, text) == javahash.java_hash_py(prefix + text)
    assert _speedups.java_hash_concat(prefix, text) == javahash.java_hash_concat_py(prefix, text)


@settings(deadline=None, max_examples=500)
@given(st.one_of(st.text(st.sampled_from(["a", "b", "K", "\x01", "\x02", "é", "😀", " "]), max_size=30), any_text))
def test_decode_properties_twins(text):
    expected = list(_decode_properties_reference(text).items())
    assert list(_speedups.decode_properties(text).items()) == expected
    assert list(decode_properties_py(text).items()) == expected


def _record(topic: bytes, body: bytes, properties: bytes, sys_flag: int, version: int) -> bytes:
    born_ip = b"\0" * (16 if sys_flag & 0x10 else 4)
    store_ip = b"\1" * (16 if sys_flag & 0x20 else 4)
    return fm.encode_message(topic=topic, body=body, properties=properties, queue_id=3, flag=7, queue_offset=9,
                             phy_offset=123456, sys_flag=sys_flag, born_timestamp=1, born_ip=born_ip, born_port=2,
                             store_timestamp=3, store_ip=store_ip, store_port=4, version=version)


FIELDS = ("raw", "magic", "size", "phy_offset", "sys_flag", "topic", "_header", "_properties_start", "_body_start",
          "_body_end", "_properties")


def _built_or_error(function, cls: type, raw: bytes, magic: int):
    try:
        msg = function(cls, raw, magic)
    except ValueError as exc:
        return ("ValueError", str(exc))
    assert type(msg) is cls
    return [getattr(msg, name) for name in FIELDS]


records = st.builds(
    _record,
    topic=st.binary(max_size=40),  # not always UTF-8: both decode with "replace"
    body=st.binary(max_size=64),
    properties=st.binary(max_size=40),
    sys_flag=st.sampled_from([0, 0x10, 0x20, 0x30, 0x4]),
    version=st.sampled_from([1, 2]),
)


@settings(deadline=None, max_examples=300)
@given(records, st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=4),
       st.integers(-8, 8))
def test_build_message_twins_on_records_and_damaged_records(raw, flips, cut):
    damaged = bytearray(raw)
    for at, value in flips:
        if at < len(damaged):
            damaged[at] = value
    damaged = bytes(damaged[:len(damaged) + cut] if cut < 0 else damaged + b"\0" * cut)
    magic = struct.unpack_from(">I", raw, 4)[0]
    for candidate in (raw, damaged):
        if len(candidate) < fm.MIN_RECORD_SIZE:
            continue  # the callers check the minimum size first
        assert _built_or_error(_speedups.build_message, _speedups.MessageBase, candidate, magic) == \
            _built_or_error(fm.build_message_py, fm._MessageFields, candidate, magic)
    assert _built_or_error(_speedups.build_message, _speedups.MessageBase, raw, magic)[0] is raw


@settings(deadline=None, max_examples=300)
@given(st.one_of(st.sampled_from([b"", b"KEYS\x01k1 k2\x02TAGS\x01A", b"TAGS\x01\x02KEYS\x01 a  b ",
                                  b"KEYS\x01\xff\xfe", b"KEYS\x01\x02TAGS\x01\x01", b"KEYS\x01key-1",
                                  b"KEYS\x01k1\x02KEYS\x01k2", b"KEYS\x01k\x01\x7f", b"KEYS\x01\xc3\xa9"]),
                 st.binary(max_size=40),
                 st.lists(st.sampled_from([b"KEYS\x01", b"TAGS\x01", b"\x01", b"\x02", b" ", b"k1", b"\x7f",
                                           b"\xff", b"\xc3\xa9"]), max_size=10).map(b"".join)),
       st.binary(max_size=30), st.sampled_from([1, 2]))
def test_message_getters_twins(properties, body, version):
    """body, tags and keys of MessageBase's getters against the pure-Python properties of _MessageFields,
    on any properties (not UTF-8, empty KEYS, KEYS of spaces, one ASCII key, repeated KEYS), read in
    either order."""
    raw = _record(b"T", body, properties, 0, version)
    magic = struct.unpack_from(">I", raw, 4)[0]
    for order in (("body", "tags", "keys"), ("keys", "tags", "body")):
        twin = fm.build_message_py(fm._MessageFields, raw, magic)
        native = _speedups.build_message(_speedups.MessageBase, raw, magic)
        assert native._properties is None
        assert [getattr(native, name) for name in order] == [getattr(twin, name) for name in order]
        assert native._properties == twin._properties
    with pytest.raises(AttributeError):
        _speedups.MessageBase().keys  # noqa: B018 - an unset field


key_texts = st.one_of(st.sampled_from(["k1", "k2", "a", "b", "", " ", "k1 k2", "\ufffd", "\ud800", "é", "A"]),
                     st.text(st.sampled_from("ab é\ufffd"), max_size=4))


@settings(deadline=None, max_examples=500)
@given(st.one_of(st.sampled_from([b"", b"KEYS\x01k1 k2\x02TAGS\x01A", b"KEYS\x01 a  b \x02UNIQ_KEY\x01A",
                                  b"KEYS\x01\xff\xfe", b"KEYS\x01a\xff\x02UNIQ_KEY\x01\xef\xbf\xbd",
                                  b"KEYS\x01k1\x02KEYS\x01k2\x02UNIQ_KEY\x01\x02", b"KEYS\x01\x01k1\x02\x01KEYS\x01a",
                                  b"UNIQ_KEY\x01k1\x02UNIQ_KEY\x01k2", b"KEYS\x01\xc3\xa9 b"]),
                 st.binary(max_size=40), st.lists(st.sampled_from([b"KEYS", b"UNIQ_KEY", b"\x01", b"\x02", b" ",
                                                                   b"k1", b"a", b"\xff", b"\xc3\xa9"]),
                                                  max_size=12).map(b"".join)),
       key_texts, st.booleans())
def test_carries_key_twins(properties, key, parsed_first):
    """MessageBase.carries_key and keys read the stored bytes; _MessageFields' the parsed properties:
    the same answer on any properties (not UTF-8, repeated names, empty values) and any key (empty,
    U+FFFD, a lone surrogate), with the properties parsed before or not."""
    raw = _record(b"T", b"", properties, 0, 1)
    twin = fm.build_message_py(fm._MessageFields, raw, fm.MAGIC_V1)
    native = _speedups.build_message(_speedups.MessageBase, raw, fm.MAGIC_V1)
    assert native.keys == twin.keys and native._properties is None  # read on the bytes
    if parsed_first:
        assert native.tags == twin.tags and native.keys == twin.keys  # from the parsed properties
    expected = key in twin.keys or twin._properties.get("UNIQ_KEY") == key
    assert native.carries_key(key) is twin.carries_key(key) is expected


def test_carries_key_refuses_what_is_not_a_str():
    raw = _record(b"T", b"", b"KEYS\x01k1", 0, 1)
    for cls, build in ((_speedups.MessageBase, _speedups.build_message), (fm._MessageFields, fm.build_message_py)):
        with pytest.raises(TypeError, match="key must be a str"):
            build(cls, raw, fm.MAGIC_V1).carries_key(b"k1")


@st.composite
def record_places(draw):
    """A buffer of records (some damaged, some cut short by `limit`) and a (pos, limit, phy_offset) to read."""
    buf = bytearray(draw(st.binary(max_size=12)))
    starts = []
    for _ in range(draw(st.integers(0, 3))):
        topic, version = draw(st.sampled_from([(b"T", 1), (b"T", 2), (b"Topic\xff", 1)]))
        starts.append(len(buf))
        buf += _log_record(1000 + len(buf), topic, draw(st.binary(max_size=20)), version)
        buf += b"\0" * draw(st.sampled_from([0, 8]))
    for at, value in draw(st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3)):
        if at < len(buf):
            buf[at] = value
    pos = draw(st.one_of(st.sampled_from(starts or [0]), st.integers(-3, len(buf) + 3)))
    limit = draw(st.one_of(st.just(len(buf)), st.integers(-1, len(buf) + 20)))
    phy = draw(st.one_of(st.just(1000 + pos), st.integers(990, 1010)))
    return bytes(buf), pos, limit, phy


def _record_at(function, cls: type, case: tuple[bytes, int, int, int]):
    msg = function(cls, *case)
    return None if msg is None else [getattr(msg, name) for name in FIELDS]


@settings(deadline=None, max_examples=500)
@given(record_places())
def test_record_at_twins(case):
    assert _record_at(_speedups.record_at, _speedups.MessageBase, case) == \
        _record_at(fm.record_at_py, fm._MessageFields, case)


def test_record_at_reads_a_whole_record_only():
    record = _log_record(1000, b"T", b"one", 1)
    buf = record + b"\0" * 8
    for function, cls in ((_speedups.record_at, _speedups.MessageBase), (fm.record_at_py, fm._MessageFields)):
        assert function(cls, buf, 0, len(buf), 1000).raw == record
        assert function(cls, memoryview(buf), 0, len(record), 1000).raw == record
        assert function(cls, buf, 0, len(record) - 1, 1000) is None  # cut short by the limit
        assert function(cls, buf, 0, len(buf) + 100, 1000).raw == record  # a limit past the buffer is the buffer
        assert function(cls, buf, 0, len(buf), 1001) is None  # another record's offset
        assert function(cls, buf, len(record), len(buf), 1000 + len(record)) is None  # zeros
        assert function(cls, buf, -1, len(buf), 999) is None
        assert function(cls, buf, 0, 2**64, 1000).raw == record  # past int64: no record there, or the end
        assert function(cls, buf, 0, -2**64, 1000) is None
        assert function(cls, buf, 2**64, len(buf), 1000) is None
        assert function(cls, buf, 0, len(buf), 2**64 + 1000) is None
    with pytest.raises(TypeError, match="MessageBase subclass"):
        _speedups.record_at(dict, buf, 0, len(buf), 1000)
    with pytest.raises(TypeError, match="five arguments"):
        _speedups.record_at(_speedups.MessageBase, buf, 0, len(buf))


def test_messages_built_in_c_behave_as_python_objects():
    if native.speedups is None:
        pytest.skip(f"{native.PURE_PYTHON_VARIABLE} is set: StoredMessage is the pure-Python class")
    raw = _record(b"T", b"body", b"KEYS\x01k1 k2\x02TAGS\x01A", 0, 1)
    msg = _speedups.build_message(fm.StoredMessage, raw, fm.MAGIC_V1)
    assert (msg.topic, msg.body, msg.keys, msg.tags, msg.queue_id) == ("T", b"body", ["k1", "k2"], "A", 3)
    assert not hasattr(msg, "__dict__")
    with pytest.raises(AttributeError):
        _speedups.MessageBase().raw  # noqa: B018 - an unset field
    with pytest.raises(TypeError, match="MessageBase subclass"):
        _speedups.build_message(dict, raw, fm.MAGIC_V1)
    with pytest.raises(TypeError, match="raw must be bytes"):
        _speedups.build_message(fm.StoredMessage, bytearray(raw), fm.MAGIC_V1)
    msg.topic = "U"  # fields stay settable, as slots are
    assert msg.topic == "U"


@pytest.fixture(scope="module")
def index_file(tmp_path_factory) -> Iterator[IndexFile]:
    path: Path = tmp_path_factory.mktemp("index") / "20261123000000000"
    f = IndexFile(path, 64, 512, create=True)
    hashes = [(i * 7919) % 200 for i in range(300)]  # long chains, collisions in every slot
    for i, key_hash in enumerate(hashes):
        assert f.put_key(key_hash, 1000 + i, 1_700_000_000_000 + i * 400)
    yield f
    f.close()


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**31 - 1) | st.integers(0, 210), st.integers(1, 80),
       st.integers(1_699_999_990_000, 1_700_000_130_000), st.integers(0, 200_000))
def test_index_lookup_twins(index_file, key_hash, max_count, begin, span):
    f = index_file
    args = (key_hash, max_count, begin, begin + span)
    expected: list[int] = [-1]
    f.lookup_py(*args, expected)
    got: list[int] = [-1]
    h = f.header
    assert _speedups.index_lookup(f.mm, f.slots, key_hash, h.index_count, h.begin_timestamp, h.begin_phy_offset,
                                  h.end_phy_offset, begin, begin + span, max_count, got) is True
    assert got == expected


def test_index_lookup_declines_what_it_cannot_read(index_file):
    f = index_file
    out = [5]
    short = bytes(f.mm[:100])  # the slots and entries lie past the end
    n, phy = f.header.index_count, 2**40
    assert _speedups.index_lookup(short, f.slots, 3, n, 0, 0, phy, 0, 2**63 - 1, 10, out) is False
    assert _speedups.index_lookup(f.mm, f.slots, 3, n, 0, 0, phy, 0, 2**64, 10, out) is False
    assert _speedups.index_lookup(f.mm, 2**41, 3, n, 0, 0, phy, 0, 1, 10, out) is False
    assert _speedups.index_lookup(f.mm, f.slots, 3, n, 2**63 - 5, 0, phy, 0, 1, 10, out) is False
    assert out == [5]
    with pytest.raises(TypeError):
        _speedups.index_lookup(f.mm, f.slots, 3, n, 0, 0, phy, 0, 1, 10, (5,))


@settings(deadline=None, max_examples=300)
@given(st.one_of(st.binary(max_size=40), st.text(st.sampled_from(["a", "K", "\x01", "\x02", "é"]), max_size=30)
                 .map(lambda t: t.encode())), st.integers(-2, 45))
def test_properties_at_twins(raw, start):
    expected = {} if not 0 <= start < len(raw) else \
        _decode_properties_reference(raw[start:].decode("utf-8", "replace"))
    assert list(_speedups.properties_at(raw, start).items()) == list(expected.items())
    assert list(fm.properties_at_py(raw, start).items()) == list(expected.items())


def test_index_put_keys_declines_what_it_cannot_write(tmp_path):
    f = IndexFile(tmp_path / "20261123000000001", 8, 16, create=True)
    try:
        before = bytes(f.mm)
        header = (0, 0, 0, 0, 0, f.header.index_count)
        put = _speedups.index_put_keys
        one = KEY.pack(1, 10)
        assert put(f.mm, 8, header, KEY.pack(-1, 10), 20, 0, 1) is None  # a negative hash
        assert put(f.mm, 8, header, KEY.pack(2**31, 10), 20, 0, 1) is None  # past int32
        assert put(f.mm, 8, header, one, 2**64, 0, 1) is None  # a timestamp past int64
        assert put(f.mm, 8, header, one + KEY.pack(2, 11), 20, 0, 3) is None  # past the keys
        assert put(f.mm, 8, header, one[:15], 20, 0, 0) is None  # not whole keys
        assert put(f.mm, 8, header[:5] + (16,), one, 20, 0, 1) is None  # past the file's entries
        assert put(f.mm, 8, header[:5] + (2**70,), one, 20, 0, 1) is None
        assert put(f.mm, 2**41, header, one, 20, 0, 1) is None  # slot arithmetic past int64
        assert bytes(f.mm) == before
        with pytest.raises(BufferError):
            put(bytes(f.mm), 8, header, one, 20, 0, 1)  # not writable
        with pytest.raises(TypeError):
            put(f.mm, 8, header, [1, 10], 20, 0, 1)  # keys not in a buffer
        with pytest.raises(TypeError, match="six ints"):
            put(f.mm, 8, header[:5], one, 20, 0, 1)
        assert bytes(f.mm) == before
        after = put(f.mm, 8, header, KEY.pack(9, 10), 1_700_000_000_000, 0, 1)
        assert after == (1_700_000_000_000, 1_700_000_000_000, 10, 10, 1, 2)
        assert IndexHeader.unpack(f.mm) == IndexHeader(*after)
    finally:
        f.close()


@pytest.mark.timeout(60)
def test_index_lookup_stops_on_a_damaged_chain(tmp_path):
    """A chain that does not go strictly backwards (only damage makes one) is an IndexDamagedError in
    both twins instead of a walk going round for ever or an answer silently cut short."""
    f = IndexFile(tmp_path / "20261123000000002", 4, 16, create=True)
    try:
        f.put_keys(b"".join(map(KEY.pack, (5, 9, 9), (100, 200, 300))), 1_700_000_000_000)  # one slot: 5 % 4 == 9 % 4
        entry_2 = 40 + 4 * 4 + 2 * 20
        f.mm[entry_2 + 16:entry_2 + 20] = (3).to_bytes(4, "big")  # entry 2 now points forwards, at 3
        for lookup in (f.lookup, f.lookup_py):
            out: list[int] = []
            with pytest.raises(IndexDamagedError, match="entry 2 links to entry 3"):
                lookup(5, 10, 0, 2**63 - 1, out)  # 3 -> 2 -> 3: not backwards; entry 1 would be cut off
            assert out == []
            lookup(9, 1, 0, 2**63 - 1, out)  # one asked for: the walk stops before the damage
            assert out == [300]
    finally:
        f.close()


def test_fill_slots_builds_what_the_class_builds_and_what_the_python_maker_builds(monkeypatch):
    from rocketstore import kernels
    from rocketstore.results import PutResult, PutStatus

    values = (PutStatus.FLUSH_DISK_TIMEOUT, 10, 2, 300, "AC11", 1_700_000_000_000, "T", 3)
    compiled = store_module._put_result_factory()
    monkeypatch.setattr(kernels, "fill_slots", None)
    python = store_module._put_result_factory()
    for made in (compiled(*values), python(*values)):
        assert type(made) is PutResult and made == PutResult(*values) and hash(made) == hash(PutResult(*values))
    assert compiled is not python


def test_fill_slots_refuses_what_is_not_a_slot_of_the_class():
    from rocketstore.results import GetResult, PutResult

    slots = (PutResult.status, PutResult.size)
    assert _speedups.fill_slots(PutResult, slots, "s", 1).size == 1
    with pytest.raises(TypeError, match="2 descriptors but 1 values"):
        _speedups.fill_slots(PutResult, slots, "s")
    with pytest.raises(TypeError, match="slot of the class"):
        _speedups.fill_slots(PutResult, (GetResult.status,), "s")  # another class's slot
    with pytest.raises(TypeError, match="slot of the class"):
        _speedups.fill_slots(PutResult, (PutResult.ok,), True)  # a property
    with pytest.raises(TypeError):
        _speedups.fill_slots(PutResult, [PutResult.size], 1)  # descriptors must be a tuple


def _log_record(phy_offset: int, topic: bytes, body: bytes, version: int) -> bytes:
    return fm.encode_message(topic=topic, body=body, properties=b"TAGS\x01A", queue_id=1, flag=0, queue_offset=0,
                             phy_offset=phy_offset, sys_flag=0, born_timestamp=1, born_ip=b"\0" * 4, born_port=2,
                             store_timestamp=3, store_ip=b"\1" * 4, store_port=4, version=version)


@st.composite
def entry_runs(draw):
    """A commitlog file of records (some damaged), consume-queue entries pointing at them (or anywhere,
    or fillers), and the arguments of one decode_run call."""
    log_start = draw(st.sampled_from([0, 1 << 30]))
    log = bytearray()
    starts: list[tuple[int, int]] = []
    for _ in range(draw(st.integers(0, 6))):
        topic, version = draw(st.sampled_from([(b"T", 1), (b"T", 2), (b"Topic\xff", 1), (b"U" * 300, 2)]))
        record = _log_record(log_start + len(log), topic, draw(st.binary(max_size=30)), version)
        starts.append((len(log), len(record)))
        log += record
        log += b"\0" * draw(st.sampled_from([0, 0, 8]))
    for at, value in draw(st.lists(st.tuples(st.integers(0, 600), st.integers(0, 255)), max_size=3)):
        if at < len(log):
            log[at] = value
    entry = st.one_of(
        st.sampled_from(starts or [(0, 0)]).flatmap(lambda s: st.tuples(
            st.just(log_start + s[0]), st.sampled_from([s[1], s[1], s[1] + 8, s[1] - 1, 4]), st.integers(0, 3))),
        st.tuples(st.integers(-5, log_start + len(log) + 5), st.integers(-5, 300), st.integers(-2, 3)),
        st.just((0, 0x7FFFFFFF, 0)),
    )
    entries = b"".join(struct.pack(">qiq", *e) for e in draw(st.lists(entry, max_size=12)))
    entries += draw(st.sampled_from([b"", b"\0" * 7]))  # a trailing partial entry is not an entry
    return dict(entries=entries, i=draw(st.integers(0, 3)), log=bytes(log), log_start=log_start,
                log_size=len(log) + draw(st.sampled_from([0, 0, -20, -len(log) - 1, 50])),
                wanted=draw(st.one_of(st.none(), st.sets(st.integers(-1, 3)), st.frozensets(st.integers(0, 1)))),
                started=draw(st.booleans()), max_count=draw(st.integers(1, 8)),
                total_bytes=draw(st.integers(0, 400)), max_bytes=draw(st.integers(0, 1200)))


def _run(function, cls: type, case: dict):
    messages = [cls()] if case["started"] else []
    answer = function(cls, case["entries"], case["i"], case["log"], case["log_start"], case["log_size"],
                      case["wanted"], messages, case["max_count"], case["total_bytes"], case["max_bytes"])
    return answer, [[getattr(m, name, None) for name in FIELDS] for m in messages]


@settings(deadline=None, max_examples=500)
@given(entry_runs())
def test_decode_run_twins(case):
    assert _run(_speedups.decode_run, _speedups.MessageBase, case) == _run(entry_run.decode_run_py,
                                                                           fm._MessageFields, case)


def test_decode_run_reads_a_run_and_stops_where_it_must():
    first = _log_record(100, b"T", b"one", 1)
    second = _log_record(100 + len(first), b"T", b"two", 1)
    log = first + second
    entries = struct.pack(">qiq", 0, 0x7FFFFFFF, 0) + struct.pack(">qiq", 100, len(first), 1) \
        + struct.pack(">qiq", 100 + len(first), len(second), 2) + struct.pack(">qiq", 5000, 120, 1)  # filler first
    # StoredMessage builds on MessageBase unless ROCKETSTORE_PURE_PYTHON is set; then C builds the base
    compiled_cls = fm.StoredMessage if native.speedups is not None else _speedups.MessageBase
    for function, cls in ((_speedups.decode_run, compiled_cls), (entry_run.decode_run_py, fm.StoredMessage)):
        messages: list = []
        assert function(cls, entries, 0, log, 100, len(log), None, messages, 8, 0, 1 << 20) == \
            (3, len(log), entry_run.RunStop.ELSEWHERE)  # the last entry's record is not in this file
        assert [m.raw[m._body_start:m._body_end] for m in messages] == [b"one", b"two"]
        assert messages[1].topic is messages[0].topic or function is entry_run.decode_run_py
        messages = []
        assert function(cls, entries, 0, log, 100, len(log), {2}, messages, 8, 0, 1 << 20) == \
            (4, len(second), entry_run.RunStop.END)  # codes not wanted are passed over, wherever they are
        messages = []
        assert function(cls, entries, 0, log, 100, len(log), None, messages, 1, 0, 1 << 20) == \
            (2, len(first), entry_run.RunStop.FULL)
        assert function(cls, entries, 0, log, 100, len(log), None, [], 8, 0, len(first) + 1) == \
            (2, len(first), entry_run.RunStop.FULL)  # the second would pass max_bytes
        assert function(cls, entries[:40], 0, log, 100, len(log), None, [], 8, 0, 1 << 20) == \
            (2, len(first), entry_run.RunStop.END)
    with pytest.raises(ValueError, match="negative"):
        _speedups.decode_run(compiled_cls, entries, -1, log, 100, len(log), None, [], 8, 0, 1)
    with pytest.raises(OverflowError):
        _speedups.decode_run(compiled_cls, entries, 0, log, 100, len(log), None, [], 8, 2**62, 1)
    with pytest.raises(TypeError, match="MessageBase subclass"):
        _speedups.decode_run(dict, entries, 0, log, 100, len(log), None, [], 8, 0, 1)


MAX_BODY = 4000
PREPARER = Preparer(StoreConfig(max_message_size=MAX_BODY, commitlog_file_size=4096), bytes([10, 0, 0, 1]),
                    [1000] * 18)  # a record may not pass 4088 bytes: bodies near 4000 test both limits
plain_texts = st.one_of(st.sampled_from(["TagA", "k1", "k 2", " ", "", "a\x01b", "x\x02", "é", "\ud800", "😀"]),
                        st.text(st.sampled_from("ab \x01é"), max_size=6))
messages = st.builds(
    Message,
    topic=st.sampled_from(["T", "TopicTest", "Bad topic", "", "%RETRY%g", "T" * 200]),
    body=st.one_of(st.binary(max_size=40), st.integers(3900, 4010).map(bytes),
                   st.builds(bytearray, st.binary(max_size=8))),
    queue_id=st.one_of(st.integers(-2, 5), st.just(2**31), st.just(True)),
    tags=st.one_of(st.none(), plain_texts),
    keys=st.lists(plain_texts, max_size=3).map(tuple),
    properties=st.sampled_from([None, None, None, {}, {"A": "b"}]),
    born_host=st.sampled_from([None, None, "10.0.0.2:9", "[::1]:7", "", "10.0.0.2:99999", "no-port"]),
    sys_flag=st.sampled_from([0, 0, 4, 8, 12]),
    flag=st.integers(-2, 2),
    born_timestamp=st.sampled_from([None, 1, 1_700_000_000_000]),
)
PREPARE_ARGS = (prepare_module._CHECKED_TOPICS, prepare_module._PARSED_HOSTS, MAX_BODY, PREPARER._max_record_size,
                PREPARER._store_ip, prepare_module.message_shape, Prepared, prepare_module.message_slots())
"""What the compiled prepare takes after the message (the Preparer's own arguments)."""


def _prepared_or_error(message: Message):
    try:
        return PREPARER.prepare_py(message)
    except Exception as exc:  # each error type and text is compared
        return (type(exc).__name__, str(exc))


@settings(deadline=None, max_examples=600)
@given(messages)
def test_prepare_plain_twins(message):
    for topic in ("T", "TopicTest", "%RETRY%g"):
        checked_topic(topic)  # what the store has seen and checked (checked_topic fills the table)
    for host in ("10.0.0.2:9", "[::1]:7"):
        prepare_module.parsed_host(host)  # born hosts parsed before (parsed_host fills that table)
    expected = _prepared_or_error(message)
    native = _speedups.prepare_plain(message, *PREPARE_ARGS)
    if native is not None:  # it took the message: exactly what the Python path gives
        assert type(native) is Prepared and native == expected
    assert _prepared_or_error(message) == expected
    # what the compiled path declines the Python path decides; a refusal is never taken
    if isinstance(expected, tuple) and not isinstance(expected, Prepared):
        assert native is None


def test_prepare_plain_takes_the_common_message():
    checked_topic("TopicTest")
    message = Message("TopicTest", b"body", queue_id=3, tags="TagA", keys=("k1", "k2"))
    native = _speedups.prepare_plain(message, *PREPARE_ARGS)
    assert native is not None and native == PREPARER.prepare_py(message)
    assert native.keys == ("k1", "k2") and native.tail.endswith(b"TAGS\x01TagA\x02KEYS\x01k1 k2")
    unseen = Message("NeverChecked", b"body")
    assert _speedups.prepare_plain(unseen, *PREPARE_ARGS) is None


def _state() -> tuple[dict, dict, bytearray, list]:
    return {("T", 1): 7}, {}, bytearray(), []  # queue table (one queue known), per queue, index keys, placed


def _copy(prepared: Prepared, **changes: object) -> Prepared:
    return prepared._replace(**changes)


prepared_runs = st.lists(st.one_of(
    st.builds(lambda m: PREPARER.prepare_py(m), st.builds(
        Message, topic=st.sampled_from(["T", "U"]), body=st.binary(max_size=60), queue_id=st.integers(0, 2),
        tags=st.sampled_from([None, "TagA"]), keys=st.sampled_from([(), ("k",), ("a", "b")]),
        properties=st.sampled_from([None, {"DELAY": "2"}, {"UNIQ_KEY": "u1"}]),
        born_host=st.sampled_from([None, "10.0.0.9:1", "[::1]:2"]), sys_flag=st.sampled_from([0, 4, 8, 12]),
        born_timestamp=st.sampled_from([None, 5]))),
), min_size=1, max_size=8)


@settings(deadline=None, max_examples=400)
@given(prepared_runs, st.integers(0, 3), st.integers(0, 2000), st.sampled_from([0, 2**40]),
       st.sampled_from([None, ("flag", 2**31), ("body_crc", -1), ("born_ip", b"\0" * 5), ("size", 3)]))
def test_pack_run_twins(prepared, i, room, phy, damage):
    if damage is not None and prepared:  # a value no header field holds, or a size that does not add up
        prepared[-1] = _copy(prepared[-1], **{damage[0]: damage[1]})
    i = min(i, len(prepared))
    store_ip = bytes([10, 0, 0, 1])
    c_table, c_queues, c_index, c_placed = _state()
    c_next, c_records = _speedups.pack_run(prepared, i, len(prepared), phy, room, 1_700_000_000_000, c_table,
                                           store_ip, 10911, c_queues, c_index, c_placed)
    p_table, p_queues, p_index, p_placed = _state()
    p_next, p_records = append_run.pack_run_py(prepared, i, c_next, phy, room, 1_700_000_000_000, p_table, store_ip,
                                               10911, p_queues, p_index, p_placed, [1000] * 18)
    assert (c_next, c_records, c_table, c_queues, c_index, c_placed) == \
        (p_next, p_records, p_table, p_queues, p_index, p_placed)
    if c_next < len(prepared):  # it stopped: the file is full, or the message is one it leaves to the twin
        stopped = prepared[c_next]
        full = len(c_records) + stopped.size > room
        assert full or stopped.delay_level or damage is not None and c_next == len(prepared) - 1


def test_pack_run_writes_what_the_encoder_writes():
    message = Message("T", b"body", queue_id=1, tags="TagA", keys=("k",), born_timestamp=5)
    prepared = [PREPARER.prepare_py(message)]
    table, queues, index, placed = _state()
    assert _speedups.pack_run(prepared, 0, 1, 4096, 10_000, 99, table, bytes([10, 0, 0, 1]), 10911, queues, index,
                              placed) == (1, fm.encode_message(
        topic=b"T", body=b"body", properties=b"TAGS\x01TagA\x02KEYS\x01k", queue_id=1, flag=0, queue_offset=7,
        phy_offset=4096, sys_flag=0, born_timestamp=5, born_ip=PREPARER._store_ip, born_port=0, store_timestamp=99,
        store_ip=bytes([10, 0, 0, 1]), store_port=10911))
    assert table == {("T", 1): 8} and placed == [(4096, 7, 99)]
    assert index == index_service.index_keys_of([("T", 4096, ("k",), None)])
    assert queues == {("T", 1): (7, bytearray(struct.pack(">qiq", 4096, prepared[0].size, prepared[0].tags_code)))}


@settings(deadline=None, max_examples=300)
@given(st.sampled_from(["T", "主题", "T😀"]),
       st.lists(st.sampled_from(["", "k", "键", "😀", "a b", "\ud800"]), max_size=3),
       st.sampled_from([None, "", "UNIQ-1", "\ud800"]))
def test_pack_run_packs_the_index_keys_of_index_keys_of(topic, keys, uniq_key):
    """Every key with Java's hash of topic#key over UTF-16 units (astral characters, lone surrogates)."""
    checked_topic("T")
    prepared = [PREPARER.prepare_py(Message("T", b"body", queue_id=1))._replace(topic=topic, keys=tuple(keys),
                                                                                uniq_key=uniq_key)]
    table, queues, index, placed = _state()
    assert _speedups.pack_run(prepared, 0, 1, 4096, 10_000, 99, table, bytes([10, 0, 0, 1]), 10911, queues, index,
                              placed)[0] == 1
    assert index == index_service.index_keys_of([(topic, 4096, keys, uniq_key)])
    assert len(index) == KEY.size * sum(1 for k in (uniq_key, *keys) if k)
    assert [javahash.index_hash_of_signed(javahash.java_hash_py(f"{topic}#{k}")) for k in (uniq_key, *keys) if k] == \
        [h for h, _ in KEY.iter_unpack(index)]


RESULT_SLOTS = tuple(getattr(PutResult, f.name) for f in dataclasses.fields(PutResult))


@settings(deadline=None, max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**40), st.integers(0, 2**41)), max_size=6),
       st.sampled_from(["", "0A00000100002A9F", "FE8000000000000000000000000000010000270F"]),
       st.sampled_from(list(PutStatus)))
def test_put_results_twins(places, prefix, status):
    message = Message("T", b"body", queue_id=1, tags="TagA", keys=("k",))
    prepared = [PREPARER.prepare_py(message)._replace(size=17 + n, queue_id=n) for n in range(len(places))]
    native = _speedups.put_results(PutResult, RESULT_SLOTS, status, prefix, prepared, places)
    assert native == store_module.put_results_py(status, prefix, prepared, places)
    assert all(type(r) is PutResult for r in native)


def test_put_results_refuses_what_it_cannot_make():
    prepared = [PREPARER.prepare_py(Message("T", b"body"))]

    def make(*args):
        return _speedups.put_results(PutResult, RESULT_SLOTS, *args)
    with pytest.raises(ValueError, match="differ in length"):
        make(PutStatus.PUT_OK, "AB", prepared, [])
    with pytest.raises(ValueError, match="ASCII"):
        make(PutStatus.PUT_OK, "é", prepared, [(1, 2, 3)])
    with pytest.raises(TypeError, match="expected"):
        make(PutStatus.PUT_OK, "AB", prepared, [(1, 2)])
    with pytest.raises(OverflowError):
        make(PutStatus.PUT_OK, "AB", prepared, [(-1, 2, 3)])
    with pytest.raises(TypeError, match="slot"):
        _speedups.put_results(PutResult, (PutResult.status,) * 7 + (len,), PutStatus.PUT_OK, "AB", prepared,
                              [(1, 2, 3)])


@settings(deadline=None, max_examples=200)
@given(st.lists(messages, max_size=6))
def test_prepare_many_twins(batch):
    for topic in ("T", "TopicTest", "%RETRY%g"):
        checked_topic(topic)
    expected = [_prepared_or_error(m) for m in batch]
    args = PREPARE_ARGS
    native, declined = _speedups.prepare_many(batch, *args)
    assert declined == native.count(None)
    assert native == [None if n is None else e for n, e in zip(native, expected, strict=True)]
    assert native == [_speedups.prepare_plain(m, *args) for m in batch]
    # the Preparer's batch: what prepare gives one by one, the first refusal raised
    refused = [e for e in expected if not isinstance(e, Prepared)]
    if refused:
        with pytest.raises(Exception) as caught:
            PREPARER.prepare_many(iter(batch))
        assert (type(caught.value).__name__, str(caught.value)) == refused[0]
    else:
        assert PREPARER.prepare_many(iter(batch)) == expected


@settings(deadline=None, max_examples=400)
@given(st.one_of(st.binary(max_size=300), st.binary(min_size=1000, max_size=5000)), st.integers(0, 31),
       st.integers(0, 2**32 - 1))
def test_crc32_twins(data, skip, value):
    view = memoryview(data)[min(skip, len(data)):]  # any start: the folds read unaligned
    assert _speedups.crc32(view) == zlib.crc32(view)
    assert _speedups.crc32(view, value) == zlib.crc32(view, value)
    assert _speedups.crc32_portable(view, value) == zlib.crc32(view, value)
    half = len(view) // 2
    assert _speedups.crc32(view[half:], _speedups.crc32(view[:half])) == zlib.crc32(view)


def test_crc32_every_length_around_the_fold_sizes():
    data = bytes((i * 131 + 7) % 256 for i in range(1 << 12))
    for n in list(range(0, 300)) + [1023, 1024, 1025, 4095, 4096]:
        assert _speedups.crc32(data[:n]) == zlib.crc32(data[:n]), n
        assert _speedups.crc32(b"\xff" * n) == zlib.crc32(b"\xff" * n), n
    assert _speedups.crc32(b"123456789") == 0xCBF43926  # the CRC-32 check value
    with pytest.raises(TypeError):
        _speedups.crc32("text")


def test_prepare_many_asks_for_the_shape_again_when_the_flag_or_the_tags_change():
    checked_topic("T")
    tags = "TagA"
    batch = [Message("T", b"b", tags=tags, sys_flag=flag) for flag in (0, 0, 8, 8, 0, 4, 12)]
    batch += [Message("T", b"b", tags="TagB"), Message("T", b"b"), Message("T", b"b", tags=tags)]
    args = PREPARE_ARGS
    native, declined = _speedups.prepare_many(batch, *args)
    assert declined == 0
    assert native == [PREPARER.prepare_py(m) for m in batch]
    assert len({(p.in_queue, p.tags_code) for p in native}) >= 4


class _SubMessage(Message):
    """A Message subclass: the compiled prepare declines it (a subclass may override a field)."""


def test_prepare_reads_the_slots_of_a_message_and_declines_anything_else():
    checked_topic("T")
    slots = prepare_module.message_slots()
    assert slots is not None and [s.__name__ for s in slots] == list(prepare_module.MESSAGE_FIELDS)
    message = Message("T", b"body", queue_id=2, tags="TagA", keys=("k",), flag=7, born_timestamp=5)
    sub = _SubMessage("T", b"body", queue_id=2, tags="TagA", keys=("k",), flag=7, born_timestamp=5)
    expected = PREPARER.prepare_py(message)
    assert _speedups.prepare_plain(message, *PREPARE_ARGS) == expected
    assert _speedups.prepare_plain(sub, *PREPARE_ARGS) is None
    assert _speedups.prepare_many([sub, message], *PREPARE_ARGS) == ([None, expected], 1)
    assert PREPARER.prepare(sub) == expected  # the twin answers what the compiled prepare declines
    no_slots = PREPARE_ARGS[:-1] + (None,)
    assert _speedups.prepare_plain(message, *no_slots) is None
    assert _speedups.prepare_many([sub, message], *no_slots) == ([None, None], 2)
    for bad in (slots[:-1], slots[1:] + slots[:1], (PutResult.status,) + slots[1:], "slots"):
        with pytest.raises(TypeError, match="slots"):
            _speedups.prepare_plain(message, *PREPARE_ARGS[:-1], bad)


class _TrackedTopic(str):
    """A str subclass with a __dict__: the cycle collector tracks its instances."""


def test_batch_tuples_that_can_hold_no_cycle_are_left_out_of_the_cycle_collector():
    checked_topic("T")
    prepared = _speedups.prepare_plain(Message("T", b"body", queue_id=1, tags="TagA", keys=("k", "l")), *PREPARE_ARGS)
    assert not gc.is_tracked(prepared) and not gc.is_tracked(prepared.queue_key) and not gc.is_tracked(prepared.keys)
    odd = PREPARER.prepare_py(Message("T", b"body", queue_id=1, keys=("k",)))._replace(topic=_TrackedTopic("T"))
    table, queues, index, placed = _state()
    _speedups.pack_run([prepared, odd], 0, 2, 4096, 10_000, 99, table, bytes([10, 0, 0, 1]), 10911, queues, index,
                       placed)
    assert [gc.is_tracked(p) for p in placed] == [False, False]
    results = _speedups.put_results(PutResult, RESULT_SLOTS, PutStatus.PUT_OK, "AB", [prepared, odd], placed)
    assert [gc.is_tracked(r) for r in results] == [False, True]  # the second holds a tracked topic
    assert gc.collect() >= 0 and results[1].topic == "T"


def test_prepare_many_shares_a_queue_key_between_messages_of_one_queue():
    checked_topic("TopicX")
    other = "".join(["Topic", "X"])  # an equal topic, another object: a key of its own
    batch = [Message("TopicX", b"body", queue_id=q) for q in (1, 2, 1, 70000, 70000)] + \
        [Message(other, b"body", queue_id=1)]
    prepared, declined = _speedups.prepare_many(batch, *PREPARE_ARGS)
    keys = [p.queue_key for p in prepared]
    assert declined == 0 and keys == [("TopicX", q) for q in (1, 2, 1, 70000, 70000, 1)]
    assert keys[0] is keys[2] and keys[3] is keys[4] and keys[0] is not keys[1] and keys[5] is not keys[0]
    assert all(not gc.is_tracked(k) for k in keys)


def test_pack_run_refuses_a_per_queue_value_of_another_shape():
    checked_topic("T")
    prepared = [PREPARER.prepare_py(Message("T", b"body", queue_id=1))]
    table, _, index, placed = _state()
    for odd in (([], []), (7, b"")):
        with pytest.raises(TypeError, match="per_queue"):
            _speedups.pack_run(prepared, 0, 1, 0, 10_000, 99, table, bytes([10, 0, 0, 1]), 10911, {("T", 1): odd},
                               index, placed)


def test_pack_run_takes_sixteen_queues_a_run_and_the_next_call_the_rest():
    checked_topic("T")
    prepared = [PREPARER.prepare_py(Message("T", b"body", queue_id=q % 20, keys=("k",))) for q in range(45)]
    prepared += [PREPARER.prepare_py(Message("T", b"body", queue_id=3))._replace(queue_key=("T", True))]  # == ("T", 1)
    checked_topic("TopicX")
    topic_x = "TopicX"
    twin_topic = "".join(["Topic", "X"])  # equal to "TopicX", another object
    assert twin_topic == topic_x and id(twin_topic) != id(topic_x)
    prepared += [PREPARER.prepare_py(Message("TopicX", b"body", queue_id=2)),
                 PREPARER.prepare_py(Message("TopicX", b"body", queue_id=2))._replace(queue_key=(twin_topic, 2))]
    store_ip = bytes([10, 0, 0, 1])
    c_table, c_queues, c_index, c_placed = _state()
    nxt, first = _speedups.pack_run(prepared, 0, len(prepared), 0, 100_000, 7, c_table, store_ip, 1, c_queues,
                                    c_index, c_placed)
    assert nxt == 16 and len(c_queues) == 16  # message 16 is of a seventeenth queue
    records = [first]
    while nxt < len(prepared):
        nxt, more = _speedups.pack_run(prepared, nxt, len(prepared), sum(map(len, records)), 100_000, 7, c_table,
                                       store_ip, 1, c_queues, c_index, c_placed)
        records.append(more)
    p_table, p_queues, p_index, p_placed = _state()
    p_next, p_records = append_run.pack_run_py(prepared, 0, len(prepared), 0, 100_000, 7, p_table, store_ip, 1,
                                               p_queues, p_index, p_placed)
    assert (b"".join(records), c_table, c_queues, c_index, c_placed) == (p_records, p_table, p_queues, p_index,
                                                                         p_placed)
    assert c_table[("T", 1)] == 7 + 3 + 1 and c_table[("T", 19)] == 2  # the table's queue ("T", 1) came first
    assert c_table[("TopicX", 2)] == 2 and c_queues[("TopicX", 2)][0] == 0 and len(c_queues[("TopicX", 2)][1]) == 2 * 20


@st.composite
def commitlog_files(draw):
    """A commitlog file's bytes: records of every shape at their own physical offsets, then a blank
    record, zeros or nothing; some bytes overwritten (a damaged or torn record, a wrong offset or CRC)."""
    file_start = draw(st.sampled_from([0, 1 << 30]))
    buf = bytearray()
    for _ in range(draw(st.integers(0, 6))):
        sys_flag = draw(st.sampled_from([0, 0x10, 0x20, 0x30]))
        buf += fm.encode_message(
            topic=draw(st.binary(min_size=1, max_size=12)), body=draw(st.binary(max_size=40)),
            properties=draw(st.sampled_from([b"", b"TAGS\x01A", b"KEYS\x01k1 k2\x02UNIQ_KEY\x01u"])),
            queue_id=1, flag=0, queue_offset=0, phy_offset=file_start + len(buf), sys_flag=sys_flag,
            born_timestamp=1, born_ip=b"\0" * (16 if sys_flag & 0x10 else 4), born_port=2, store_timestamp=3,
            store_ip=b"\1" * (16 if sys_flag & 0x20 else 4), store_port=4, version=draw(st.sampled_from([1, 2])))
    buf += draw(st.sampled_from([fm.encode_blank(64) + b"\0" * 56, b"\0" * 64, b"", b"\0" * 3]))
    for at, value in draw(st.lists(st.tuples(st.integers(0, max(0, len(buf) - 1)), st.integers(0, 255)),
                                   max_size=3)):
        if buf:
            buf[at] = value
    return bytes(buf), file_start, draw(st.booleans())


@settings(deadline=None, max_examples=500)
@given(commitlog_files())
def test_walk_records_twins(case):
    from rocketstore.services import recovery

    buf, file_start, check_crc = case
    assert _speedups.walk_records(buf, 0, file_start, check_crc) == \
        tuple(recovery.walk_records_py(buf, 0, file_start, check_crc))


def test_walk_records_refuses_a_position_outside_the_buffer():
    with pytest.raises(ValueError, match="outside"):
        _speedups.walk_records(b"\0" * 8, 9, 0, True)


DISPATCH_PROPERTIES = [
    b"", b"TAGS\x01A", b"TAGS\x01", b"KEYS\x01k1 k2  k3\x02UNIQ_KEY\x01u", b"KEYS\x01 \x02TAGS\x01\xff\xfe",
    b"TAGS\x01\xf0\x9f\x98\x80\x02KEYS\x01single", b"DELAY\x013\x02TAGS\x01B", b"UNIQ_KEY\x01\x02KEYS\x01a",
    b"TAGS\x01A\x02KEYS\x01k\x02TAGS\x01B\x02TAGS\x01", b"KEYS\x01a b\x02KEYS\x01c",
    b"\x01v\x02TAGS\x02KEYS\x01\xe2\x82\x02UNIQ_KEY\x01u\x01w",
    b"TAGS\x01t\xc3\xa9\xed\xa0\x80\x02KEYS\x01\xe2\x82 k\xf0\x9f\x98\x80 \xff\x02UNIQ_KEY\x01\xc3"]
"""Properties texts of dispatch's cases: tags, keys and UNIQ_KEY present, empty, repeated or absent, text
beyond ASCII, bytes that are not UTF-8 (a surrogate's, a cut sequence), segments without a name."""


@st.composite
def dispatch_files(draw):
    """A commitlog file's bytes with records whose properties carry tags, keys and UNIQ_KEY (or not),
    some of SCHEDULE_TOPIC_XXXX, not always valid UTF-8, then a blank record or zeros; some bytes
    overwritten."""
    buf = bytearray()
    for _ in range(draw(st.integers(0, 6))):
        sys_flag = draw(st.sampled_from([0, 0x10, 0x20, 0x30, 0x4, 0x8, 0xC]))
        properties = draw(st.sampled_from(DISPATCH_PROPERTIES))
        buf += fm.encode_message(
            topic=draw(st.sampled_from([b"T", b"TopicB", b"SCHEDULE_TOPIC_XXXX", b"\xff\xfeT"])),
            body=draw(st.binary(max_size=20)), properties=properties, queue_id=draw(st.integers(0, 3)), flag=0,
            queue_offset=draw(st.sampled_from([len(buf) // 100, len(buf) // 100 + 1, 2**40])), phy_offset=len(buf),
            sys_flag=sys_flag,
            born_timestamp=1, born_ip=b"\0" * (16 if sys_flag & 0x10 else 4), born_port=2,
            store_timestamp=draw(st.integers(0, 2**41)), store_ip=b"\1" * (16 if sys_flag & 0x20 else 4),
            store_port=4, version=draw(st.sampled_from([1, 2])))
    buf += draw(st.sampled_from([fm.encode_blank(64) + b"\0" * 56, b"\0" * 64, b"", b"\0" * 3]))
    for at, value in draw(st.lists(st.tuples(st.integers(0, max(0, len(buf) - 1)), st.integers(0, 255)),
                                   max_size=2)):
        if buf:
            buf[at] = value
    limit = draw(st.integers(0, len(buf)))
    return bytes(buf), limit, draw(st.integers(1, 8))


@settings(deadline=None, max_examples=500)
@given(dispatch_files())
def test_dispatch_requests_twins(case):
    from rocketstore.services import dispatch

    buf, limit, max_count = case
    compiled: list = []
    twin: list = []
    got = _speedups.dispatch_requests(dispatch.DispatchRequest, buf, 0, limit, max_count, "SCHEDULE_TOPIC_XXXX",
                                      compiled)
    want = dispatch.dispatch_requests_py(dispatch.DispatchRequest, buf, 0, limit, max_count, "SCHEDULE_TOPIC_XXXX",
                                         twin)
    assert got == tuple(want)
    assert compiled == twin
    assert all(type(r) is dispatch.DispatchRequest for r in compiled)


@settings(deadline=None, max_examples=500)
@given(dispatch_files(), st.data())
def test_dispatch_packed_twins(case, data):
    """The catch-up's one pass over the bytes makes what dispatch_requests then pack_requests make."""
    from rocketstore.services import dispatch

    buf, limit, max_count = case
    queue_from = data.draw(st.integers(-1, len(buf) + 1))
    index_from = data.draw(st.integers(-1, len(buf) + 1))
    inclusive = data.draw(st.booleans())
    args = (dispatch.DispatchRequest, buf, 0, limit, max_count, "SCHEDULE_TOPIC_XXXX", queue_from, index_from,
            inclusive)
    pos, stop, runs, groups, count, last = _speedups.dispatch_packed(*args)
    want_pos, want_stop, want_runs, want_groups, want_count, want_last = dispatch.dispatch_packed_py(*args)
    assert (pos, stop, count, last) == (want_pos, want_stop, want_count, want_last)
    assert _packed(runs, groups) == _packed(want_runs, want_groups)
    assert all(type(newest) is dispatch.DispatchRequest for *_, newest in runs)


@pytest.mark.parametrize("topic", [b"T", b"\xff\xfeT", "é😀".encode()])
def test_dispatch_packed_twins_on_every_kind_of_properties(topic):
    """Every properties case of `dispatch_files`, each in whole records of every transaction type, two
    queues with runs that follow one another and that jump, through both."""
    from rocketstore.services import dispatch

    buf = bytearray()
    for i, (properties, sys_flag) in enumerate((p, f) for p in DISPATCH_PROPERTIES for f in (0, 0x4, 0x8, 0xC)):
        buf += fm.encode_message(
            topic=topic, body=b"b%d" % i, properties=properties, queue_id=i % 2, flag=0,
            queue_offset=i // 2 + (i > 30), phy_offset=len(buf), sys_flag=sys_flag, born_timestamp=1,
            born_ip=b"\0" * 4, born_port=2, store_timestamp=1000 + i // 3, store_ip=b"\1" * 4, store_port=4,
            version=1)
    for queue_from, index_from, inclusive in ((0, 0, True), (0, 0, False), (len(buf) // 2, 0, True)):
        args = (dispatch.DispatchRequest, bytes(buf), 0, len(buf), 1000, "SCHEDULE_TOPIC_XXXX", queue_from,
                index_from, inclusive)
        got, want = _speedups.dispatch_packed(*args), dispatch.dispatch_packed_py(*args)
        assert got[4] == want[4] == 4 * len(DISPATCH_PROPERTIES)
        assert (got[:2], got[4:]) == (want[:2], want[4:])
        assert _packed(*got[2:4]) == _packed(*want[2:4])


def test_dispatch_packed_refuses_positions_outside_the_buffer():
    from rocketstore.services import dispatch

    with pytest.raises(ValueError, match="outside"):
        _speedups.dispatch_packed(dispatch.DispatchRequest, b"\0" * 8, 0, 9, 1, "S", 0, 0, True)


def test_dispatch_requests_refuses_positions_outside_the_buffer():
    from rocketstore.services import dispatch

    with pytest.raises(ValueError, match="outside"):
        _speedups.dispatch_requests(dispatch.DispatchRequest, b"\0" * 8, 0, 9, 1, "S", [])


@st.composite
def request_lists(draw):
    """Dispatch requests in log order over a few queues (queue offsets that follow one another or jump),
    stores in a few milliseconds, every transaction type, keys and UNIQ_KEY or not; and the thresholds."""
    from rocketstore.services.dispatch import DispatchRequest

    reqs = []
    phy = draw(st.integers(0, 1000))
    next_offset: dict[tuple[str, int], int] = {}
    store_ts = 1_700_000_000_000
    for _ in range(draw(st.integers(0, 30))):
        topic = draw(st.sampled_from(["A", "Bé", "C"]))
        queue_id = draw(st.integers(0, 2))
        offset = next_offset.get((topic, queue_id), draw(st.integers(0, 5)))
        offset += draw(st.sampled_from([0, 0, 0, 1, -1]))
        next_offset[(topic, queue_id)] = offset + 1
        store_ts += draw(st.sampled_from([0, 0, 1, 7]))
        size = draw(st.integers(91, 300))
        keys = draw(st.sampled_from([(), ("k1",), ("k1", "k😀"), ("", "x")]))
        uniq = draw(st.sampled_from([None, "", "U1"]))
        sys_flag = draw(st.sampled_from([0, 4, 8, 12, 0x10]))
        reqs.append(DispatchRequest(topic, queue_id, phy, size, draw(st.integers(-2**40, 2**40)), store_ts, offset,
                                    keys, uniq, sys_flag))
        phy += size
    starts = [r.phy_offset for r in reqs] or [0]  # a threshold on a record start tells >= from >
    queue_from = draw(st.one_of(st.sampled_from(starts), st.integers(0, phy + 1)))
    index_from = draw(st.one_of(st.sampled_from(starts), st.integers(-1, phy + 1)))
    return reqs, queue_from, index_from, draw(st.booleans())


def _packed(runs, groups):
    return ([(key, first, bytes(units), bytes(ends), newest) for key, first, units, ends, newest in runs],
            [(ts, bytes(keys), keyless, count) for ts, keys, keyless, count in groups])


@settings(deadline=None, max_examples=500)
@given(request_lists())
def test_pack_requests_twins(case):
    from rocketstore.services import dispatch

    assert _packed(*_speedups.pack_requests(*case)) == _packed(*dispatch.pack_requests_py(*case))


def test_pack_requests_refuses_what_is_not_a_request():
    with pytest.raises(TypeError, match="DispatchRequests"):
        _speedups.pack_requests([("T", 0)], 0, 0, True)


def test_populate_takes_a_range_of_a_writable_mapping_and_writes_no_data(tmp_path):
    import mmap

    path = tmp_path / "file"
    path.write_bytes(b"\x07" * 4096 + bytes(8 * 4096))
    with path.open("r+b") as f, mmap.mmap(f.fileno(), 0) as mm:
        assert _speedups.populate(mm, 100, 3 * 4096) is True  # from the page holding byte 100
        assert _speedups.populate(mm, 5 * 4096, 10**9) is True  # clamped to the mapping
        assert _speedups.populate(mm, 10**9, 1) is True and _speedups.populate(mm, 0, 0) is True  # nothing to do
        assert mm[:4096] == b"\x07" * 4096 and mm[4096:] == bytes(8 * 4096)
        with pytest.raises(ValueError, match="populate: a negative start or length"):
            _speedups.populate(mm, -1, 10)
        with pytest.raises(TypeError, match="populate"):
            _speedups.populate(mm, 0)
        with pytest.raises(BufferError):
            _speedups.populate(b"read-only bytes", 0, 1)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as ro:
        with pytest.raises(BufferError):
            _speedups.populate(ro, 0, 1)  # a read-only mapping is no place to write
