"""What crosses the kernel boundary: the compiled code reads no attribute of the store's objects by name.
Each object a kernel keeps state in is (a base class) a state type of the compiled module, whose pure
twin has the same slots; a kernel reads its fields after a type check and declines any other object."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.log.consume_queue import ConsumeQueue, ConsumeQueueState
from rocketstore.log.index_file import IndexFile, IndexFileState
from rocketstore.native import speedups
from rocketstore.storage.mapped_file import MappedFile, MappedFileState
from rocketstore.storage.mapped_file_queue import FileQueueState, MappedFileQueue

C_SOURCES = Path(__file__).resolve().parents[2] / "src" / "rocketstore" / "_c"
BY_NAME = re.compile(r"\b(?:PyObject_(?:Get|Set|Has|Del)Attr(?:String)?|_PyObject_LookupAttr\w*|"
                     r"PyObject_GenericGetAttr)\s*\((?P<args>[^;]*)")
"""A call that reads, writes or probes an attribute by name."""

SLOT_BY_OFFSET = re.compile(r"\(char \*\)\s*\w+\s*\+\s*\w*(?:->)?\w*offset")
"""A read of an object's memory at a slot's offset, computed by hand (`*(PyObject **)((char *)o + offset)`)."""

STATES = [(MappedFile, MappedFileState, "MappedFileState"), (MappedFileQueue, FileQueueState, "FileQueueState"),
          (ConsumeQueue, ConsumeQueueState, "ConsumeQueueState"), (IndexFile, IndexFileState, "IndexFileState")]

compiled_only = pytest.mark.skipif(speedups is None,
                                   reason="the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")


def _reads_by_name() -> set[tuple[str, str]]:
    """(file, arguments) of each read by name in the C sources, whitespace folded."""
    return {(source.name, m["args"]) for source in sorted(C_SOURCES.glob("*.[ch]"))
            for m in BY_NAME.finditer(" ".join(source.read_text().split()))}


def test_the_c_sources_read_no_attribute_by_name_and_no_slot_by_offset():
    """No compiled code reads an attribute by name, or a slot at an offset of its own computing: the
    state types' fields are struct fields, a Message's are read through the members its slot descriptors
    define (a message of any other class is declined)."""
    assert C_SOURCES.is_dir()
    assert _reads_by_name() == set()
    assert not any("attribute_names" in s.read_text() for s in C_SOURCES.glob("*.[ch]"))
    for source in sorted(C_SOURCES.glob("*.[ch]")):
        assert not SLOT_BY_OFFSET.search(source.read_text()), f"{source.name} reads a slot by offset"


def test_the_offset_scan_catches_a_slot_read():
    assert SLOT_BY_OFFSET.search("PyObject *v = *(PyObject **)((char *)message + layout->offset[field]);")


def test_the_scan_catches_a_read_by_name():
    text = "PyObject *v = PyObject_GetAttr(file, rs_name);\nPyObject_SetAttrString(q, \"max\", v);\n"
    found = {m["args"] for m in BY_NAME.finditer(text)}
    assert found == {'file, rs_name)', 'q, "max", v)'}


@pytest.mark.parametrize(("owner", "twin", "name"), STATES)
def test_each_state_is_a_base_of_its_object_with_the_twins_slots(owner, twin, name):
    base = twin if speedups is None else getattr(speedups, name)
    assert base in owner.__mro__
    if speedups is not None:
        members = {k for k, v in vars(base).items() if type(v).__name__ == "member_descriptor"}
        assert members == set(twin.__slots__)


@compiled_only
def test_put_one_declines_objects_that_are_not_its_state_types(tmp_path):
    config = StoreConfig(commitlog_file_size=64 * 1024, consume_queue_file_entries=64, index_hash_slots=11,
                         index_max_entries=64, deliver_delayed_messages=False)
    with MessageStore.open(tmp_path / "store", config) as store:
        store.put(Message("Boundary", b"first", queue_id=0))
        put_one = store._writes._put_one
        assert put_one is not None
        log = store.commitlog.queue.files[-1]
        p = store._writes.preparer.prepare(Message("Boundary", b"second", queue_id=0))
        fake = SimpleNamespace(**{k: getattr(log, k) for k in MappedFileState.__slots__})  # the same fields
        before = bytes(log.mm)
        assert put_one(p, fake, 1, 1, 0, None, None) is None
        assert bytes(log.mm) == before and fake.wrote_position == log.wrote_position
        assert put_one(p, log, 1, 1, 0, None, None) is not None  # the MappedFile itself: written
        assert bytes(log.mm) != before
