"""The layout tables (`format.layout`): the structs, positions and widths they give are the ones the
module docstrings draw and RocketMQ writes, and the C header carries every one of them."""

from __future__ import annotations

import pytest

from rocketstore.format import consume_queue, index
from rocketstore.format.layout import JAVA_INT_MAX, JAVA_LONG_MIN, Field, Layout, c_name
from rocketstore.log import index_file
from rocketstore.store import c_layout


@pytest.mark.parametrize(("layout", "size", "fields"), [
    (index.HEADER_LAYOUT, 40, [("beginTimestamp", 0, 8), ("endTimestamp", 8, 8), ("beginPhyOffset", 16, 8),
                               ("endPhyOffset", 24, 8), ("hashSlotCount", 32, 4), ("indexCount", 36, 4)]),
    (index.ENTRY_LAYOUT, 20, [("keyHash", 0, 4), ("physical offset", 4, 8), ("timeDiff (seconds)", 12, 4),
                              ("previous entry number", 16, 4)]),
    (consume_queue.UNIT_LAYOUT, 20, [("commitlog physical offset", 0, 8), ("message size", 8, 4),
                                     ("tags hash code", 12, 8)]),
])
def test_the_tables_give_rocketmqs_positions_and_widths(layout, size, fields):
    assert layout.size == layout.codec.size == size
    assert [(f.name, layout.position(f.name), layout.width(f.name)) for f in layout.fields] == fields
    assert layout.codec.format.startswith(">")  # RocketMQ's files are big-endian


def test_the_module_structs_are_the_tables():
    assert index.HEADER is index.HEADER_LAYOUT.codec and index.ENTRY is index.ENTRY_LAYOUT.codec
    assert consume_queue.UNIT is consume_queue.UNIT_LAYOUT.codec
    assert index_file.KEY is index.KEY_LAYOUT.codec and index_file.KEY.size == 16
    assert index.MAX_TIME_DIFF == consume_queue.FILLER_SIZE == JAVA_INT_MAX


def test_the_c_header_carries_each_tables_size_positions_widths_and_field_indices():
    header = c_layout.header()
    for prefix, layout in [("INDEX_HEADER", index.HEADER_LAYOUT), ("INDEX_ENTRY", index.ENTRY_LAYOUT),
                           ("INDEX_KEY", index.KEY_LAYOUT), ("CQ", consume_queue.UNIT_LAYOUT)]:
        assert f"#define {prefix}_SIZE {layout.size}\n" in header
        assert f"#define {prefix}_FIELDS {len(layout.fields)}\n" in header
        for i, f in enumerate(layout.fields):
            name = f"{prefix}_{c_name(f.name)}"
            assert f"#define {name}_POS {layout.position(f.name)}\n" in header
            assert f"#define {name}_WIDTH {layout.width(f.name)}\n" in header
            assert f"#define {name}_FIELD {i}\n" in header
    assert "#define JAVA_INT_MAX 0x7FFFFFFFLL\n" in header
    assert c_layout.LAYOUT["JAVA_LONG_MIN"] == JAVA_LONG_MIN


def test_a_table_says_which_field_it_lacks_and_draws_itself():
    layout = Layout("pair", (Field("a", "i", "first"), Field("b (ms)", "q", "second")))
    assert layout.size == 12 and layout.index("b (ms)") == 1 and c_name("b (ms)") == "B"
    with pytest.raises(KeyError, match="pair has no field 'c'"):
        layout.position("c")
    assert layout.table().splitlines()[1:] == ["    0    4    a                           first",
                                              "    4    8    b (ms)                      second"]
