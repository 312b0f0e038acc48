"""The commitlog record as layout data (`format.message`): its fixed part for each host shape, its variable
fields, and the C header's record defines, all drawn from them."""

from __future__ import annotations

import pytest

from rocketstore.format import message
from rocketstore.store import c_layout

V4, V6 = message.IP_WIDTHS


@pytest.mark.parametrize(("born", "store", "size"), [(V4, V4, 88), (V6, V4, 100), (V4, V6, 100), (V6, V6, 112)])
def test_each_host_shape_has_its_header_and_its_struct(born, store, size):
    layout = message.header_layout(born, store)
    assert message.header_struct(born, store) is layout.codec and layout.size == size
    assert layout.position("STORETIMESTAMP") == 52 + born and layout.position("RECONSUMETIMES") == 64 + born + store
    assert [f.name for f in layout.fields][-1] == "BODYLENGTH" == message.BODY.length_field().name
    assert layout.fields[:9] == message.FIXED_HEAD_LAYOUT.fields and message.FIXED_HEAD.size == 48


def test_the_variable_fields_are_counted_as_rocketmq_counts_them():
    v1, v2 = message.VARIABLE_FIELDS[message.MAGIC_V1], message.VARIABLE_FIELDS[message.MAGIC_V2]
    assert [(p.name, p.length_width) for p in v1] == [("BODY", 4), ("TOPIC", 1), ("PROPERTIES", 2)]
    assert [(p.name, p.length_width) for p in v2] == [("BODY", 4), ("TOPIC", 2), ("PROPERTIES", 2)]
    assert message.MIN_RECORD_SIZE == 88 + v1[1].length_width + v1[2].length_width == 91


def test_the_c_header_says_what_the_record_layout_says():
    header, plain = c_layout.LAYOUT, message.header_layout(V4, V4)
    for name in ("TOTALSIZE", "MAGICCODE", "BODYCRC", "QUEUEID", "FLAG", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
                 "BORNTIMESTAMP"):
        assert header[f"REC_{name}_POS"] == plain.position(name) and header[f"REC_{name}_FIELD"] == plain.index(name)
    for f in plain.fields:
        assert header[f"REC_{f.name.replace(' ', '_').upper()}_WIDTH"] == plain.width(f.name)
    after_born_ip = plain.position("BORNHOST ip") + V4
    after_store_ip = plain.position("STOREHOST ip") + V4
    assert header["REC_AFTER_BORN_IP_STORETIMESTAMP_POS"] == plain.position("STORETIMESTAMP") - after_born_ip == 4
    assert header["REC_AFTER_STORE_IP_BODYLENGTH_POS"] == plain.position("BODYLENGTH") - after_store_ip == 16
    assert header["REC_AFTER_BORN_IP_SIZE"] == after_store_ip - V4 - after_born_ip == 12
    assert header["REC_AFTER_STORE_IP_SIZE"] == plain.size - after_store_ip == 20
    assert (header["IPV4_WIDTH"], header["IPV6_WIDTH"], header["REC_HEADER_V4_SIZE"], header["REC_V6_EXTRA"]) == (
        4, 16, 88, 12)
    assert (header["REC_V1_TOPICLENGTH_WIDTH"], header["REC_V2_TOPICLENGTH_WIDTH"],
            header["REC_PROPERTIESLENGTH_WIDTH"], header["REC_BODYLENGTH_WIDTH"]) == (1, 2, 2, 4)
    assert "REC_TOPICLENGTH_WIDTH" not in header  # the versions differ: one define each
