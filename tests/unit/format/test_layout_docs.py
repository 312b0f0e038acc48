"""The byte tables of the docs and of the format modules' docstrings are the layouts' own
(`format.layout_docs`), and the record's table says where each field of a real record is."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rocketstore.format import layout_docs, message
from rocketstore.format.layout import Field, Layout

ROOT = Path(__file__).resolve().parents[3]
REGENERATE = "python -m rocketstore.format.layout_docs docs/format.md"


def test_every_table_of_the_docs_is_its_layouts():
    pages = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    seen = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert layout_docs.stale(text) == [], f"{page.name}: regenerate with `{REGENERATE}`"
        seen += layout_docs.blocks(text)
    assert sorted(seen) == sorted(layout_docs.DOC_TABLES)  # each layout drawn once


@pytest.mark.parametrize("module", list(layout_docs.DOCSTRING_TABLES), ids=lambda m: m.__name__)
def test_each_format_modules_docstring_shows_its_layouts_tables(module):
    for table in layout_docs.DOCSTRING_TABLES[module]():
        assert table in (module.__doc__ or ""), f"{module.__name__}'s docstring should show:\n{table}"


def test_a_changed_layout_makes_its_block_stale_and_render_rewrites_it():
    page = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    edited = page.replace("| 8 | 4 | `message size` |", "| 8 | 8 | `message size` |")
    assert edited != page and layout_docs.stale(edited) == ["consume-queue-unit"]
    assert layout_docs.render(edited) == page
    with pytest.raises(KeyError):
        layout_docs.render("<!-- layout: no-such-layout -->\n<!-- /layout -->")


def test_a_layout_draws_itself_as_markdown():
    layout = Layout("pair", (Field("a", "i", "first"), Field("b", "q", "")))
    assert layout.markdown().splitlines() == ["| pos | len | field | meaning |", "|---:|---:|---|---|",
                                              "| 0 | 4 | `a` | first |", "| 4 | 8 | `b` |  |"]


@pytest.mark.parametrize(("born_ip", "store_ip"), [(b"\x01" * 4, b"\x02" * 4), (b"\x01" * 16, b"\x02" * 4),
                                                   (b"\x01" * 4, b"\x02" * 16), (b"\x01" * 16, b"\x02" * 16)])
@pytest.mark.parametrize("version", [1, 2])
def test_the_record_table_places_each_field_of_an_encoded_record(born_ip, store_ip, version):
    values = {"QUEUEID": 7, "FLAG": 3, "QUEUEOFFSET": 11, "PHYSICALOFFSET": 4096, "BORNTIMESTAMP": 1_700_000_000_001,
              "BORNHOST ip": born_ip, "BORNHOST port": 9876, "STORETIMESTAMP": 1_700_000_000_002,
              "STOREHOST ip": store_ip, "STOREHOST port": 10911, "RECONSUMETIMES": 2,
              "PREPAREDTRANSACTIONOFFSET": 123, "BODY": b"body!"}
    raw = message.encode_message(
        topic=b"T", body=values["BODY"], properties=b"TAGS\x01a\x02", queue_id=7, flag=3, queue_offset=11,
        phy_offset=4096, sys_flag=0, born_timestamp=values["BORNTIMESTAMP"], born_ip=born_ip, born_port=9876,
        store_timestamp=values["STORETIMESTAMP"], store_ip=store_ip, store_port=10911, reconsume_times=2,
        prepared_transaction_offset=123, version=version)
    extra = {"b": len(born_ip) - 4, "s": len(store_ip) - 4}
    values |= {"TOTALSIZE": len(raw), "MAGICCODE": message.MAGIC_V1 if version == 1 else message.MAGIC_V2,
               "BODYCRC": message.body_crc(values["BODY"]), "SYSFLAG": message.record_sys_flag(0, born_ip, store_ip),
               "BODYLENGTH": len(values["BODY"])}
    checked = 0
    for pos, width, name, _ in message.record_rows():
        if pos == "...":
            continue
        at = sum(extra[part] if part in extra else int(part) for part in pos.split("+"))
        if name == "BODY":
            assert raw[at:at + values["BODYLENGTH"]] == values["BODY"]
        else:
            size = {"4 / 16": len(values[name]) if isinstance(values[name], bytes) else 4}.get(width) or int(width)
            field = raw[at:at + size]
            got = field if isinstance(values[name], bytes) else int.from_bytes(field, "big", signed=name != "MAGICCODE")
            assert got == values[name], name
        checked += 1
    assert checked == len(values) and raw.endswith(b"T" + struct.pack(">h", 7) + b"TAGS\x01a\x02")
