"""The C header of the compiled helpers, derived from the Python declarations: `_layout.h`.

The layouts (record, consume-queue unit, index file: each a table, `format.layout`), Java's
integer limits, the sys flag bits and the field order of
`Prepared` and of the `Message` fields the compiled prepare reads are declared once, in Python
(`format.message`, `format.consume_queue`, `format.index`, `format.sysflag`, `format.properties`,
`store.prepare`). `setup.py` runs this module (with the standard library only) before it compiles
the C files of `rocketstore/_c/`, which include the header instead of repeating those values; `LAYOUT`
is what the header says, and the built module reports what it was compiled with
(`_speedups.layout()`), which a test holds to this module.

    python src/rocketstore/store/c_layout.py OUT.h
"""

from __future__ import annotations

import sys

from rocketstore.format import consume_queue, index, message, properties, sysflag
from rocketstore.format.layout import JAVA_LIMITS, c_name
from rocketstore.format.sysflag import SysFlag


def _only(defines: dict[str, int], *suffixes: str) -> dict[str, int]:
    return {name: value for name, value in defines.items() if name.endswith(suffixes)}


def _record() -> dict[str, int]:
    """The record (`format.message`): REC_NAME_POS/_WIDTH/_FIELD of its fields up to BORNHOST (their
    positions do not depend on the hosts), the widths of the rest with IPv4 hosts, the positions after
    each IP relative to that IP's end (REC_AFTER_BORN_IP_*, REC_AFTER_STORE_IP_*), the IP widths, the
    header's size with IPv4 hosts and what an IPv6 host adds, and the width of the count before each variable
    field (REC_PROPERTIESLENGTH_WIDTH; REC_V1_TOPICLENGTH_WIDTH and REC_V2_... where the versions differ)."""
    v4, v6 = message.IP_WIDTHS
    header = message.header_layout(v4, v4)
    out = _only(message.FIXED_HEAD_LAYOUT.c_defines("REC"), "_POS", "_WIDTH", "_FIELD")
    out |= _only(header.c_defines("REC"), "_WIDTH")
    out |= _only(header.part("BORNHOST port", "STOREHOST ip").c_defines("REC_AFTER_BORN_IP"), "_POS", "_SIZE")
    out |= _only(header.part("STOREHOST port").c_defines("REC_AFTER_STORE_IP"), "_POS", "_SIZE")
    out["IPV4_WIDTH"], out["IPV6_WIDTH"] = v4, v6
    out["REC_HEADER_V4_SIZE"] = header.size
    out["REC_V6_EXTRA"] = message.header_layout(v6, v4).size - header.size
    versions = {"V1": message.VARIABLE_FIELDS[message.MAGIC_V1], "V2": message.VARIABLE_FIELDS[message.MAGIC_V2]}
    for pieces in zip(*versions.values(), strict=True):
        count = c_name(pieces[0].length_field().name)
        if len({piece.length_width for piece in pieces}) == 1:
            out[f"REC_{count}_WIDTH"] = pieces[0].length_width
        else:
            out.update({f"REC_{version}_{count}_WIDTH": piece.length_width
                        for version, piece in zip(versions, pieces, strict=True)})
    return out


def _transaction_rules() -> dict[str, int]:
    """format.sysflag's dispatch rule as bit sets over the transaction types (type >> shift)."""
    mask = sysflag.TRANSACTION_MASK
    shift = (mask & -mask).bit_length() - 1
    types = range(0, mask + 1, 1 << shift)
    return {"TRANSACTION_MASK": mask, "TRANSACTION_SHIFT": shift,
            "QUEUED_TRANSACTION_TYPES": sum(1 << (t >> shift) for t in types if sysflag.gets_queue_entry(t)),
            "INDEXED_TRANSACTION_TYPES": sum(1 << (t >> shift) for t in types if sysflag.gets_index_entry(t))}


def _layout() -> dict[str, int]:
    return {
        "MAGIC_V1": message.MAGIC_V1 & 0xFFFFFFFF,
        "MAGIC_V2": message.MAGIC_V2 & 0xFFFFFFFF,
        "BLANK_MAGIC": message.BLANK_MAGIC & 0xFFFFFFFF,
        "CRC_MASK": message.CRC_MASK,
        "FIXED_HEAD_SIZE": message.FIXED_HEAD.size,
        "MIN_RECORD_SIZE": message.MIN_RECORD_SIZE,
        "BORN_V6": int(SysFlag.BORNHOST_V6),
        "STORE_V6": int(SysFlag.STOREHOST_V6),
        "UNIT_SIZE": consume_queue.UNIT_SIZE,
        "FILLER_SIZE": consume_queue.FILLER_SIZE,
        "INDEX_HEADER_SIZE": index.HEADER_SIZE,
        "INDEX_SLOT_SIZE": index.SLOT_SIZE,
        "INDEX_ENTRY_SIZE": index.ENTRY_SIZE,
        "MAX_PROPERTIES_LENGTH": properties.MAX_PROPERTIES_LENGTH,
        **_transaction_rules(),
        **_record(),
        **JAVA_LIMITS,
        **consume_queue.UNIT_LAYOUT.c_defines("CQ"),
        **index.HEADER_LAYOUT.c_defines("INDEX_HEADER"),
        **index.ENTRY_LAYOUT.c_defines("INDEX_ENTRY"),
        **index.KEY_LAYOUT.c_defines("INDEX_KEY"),
    }


def _run_stops() -> dict[str, int]:
    from rocketstore.log.entry_run import RunStop

    return {f"RUN_{stop.name}": int(stop) for stop in RunStop}


def _walk_stops() -> dict[str, int]:
    from rocketstore.services.recovery import WalkStop

    return {f"WALK_{stop.name}": int(stop) for stop in WalkStop}


def _request_stops() -> dict[str, int]:
    from rocketstore.services.dispatch import RequestStop

    return {f"REQUESTS_{stop.name}": int(stop) for stop in RequestStop}


def _field_orders() -> dict[str, tuple[str, ...]]:
    from rocketstore.services.dispatch import DispatchRequest
    from rocketstore.store.prepare import MESSAGE_FIELDS, Prepared

    return {"P": tuple(Prepared._fields), "M": MESSAGE_FIELDS, "D": tuple(DispatchRequest._fields)}


LAYOUT = _layout()
"""Name -> value of every #define of the header (the field counts and indices come on top)."""


def _literal(value: int) -> str:
    if value == JAVA_LIMITS["JAVA_LONG_MIN"]:  # no C literal: its negation overflows
        return f"({value + 1}LL - 1)"
    if value < 0:
        return f"({value}LL)"
    if JAVA_LIMITS["JAVA_INT_MAX"] < value <= 0xFFFFFFFF:  # the record magics: compared with uint32 reads
        return f"{value:#X}u".replace("0X", "0x")
    return f"{value:#X}LL".replace("0X", "0x") if value > 0xFFFF else str(value)


def compiled_with() -> dict[str, object]:
    """What `_speedups.layout()` reports for a module compiled with this header."""
    orders = _field_orders()
    return {"layout": dict(LAYOUT), "prepared": orders["P"], "message": orders["M"], "run_stops": _run_stops(),
            "walk_stops": _walk_stops(), "request_stops": _request_stops(), "dispatch": orders["D"]}


def header() -> str:
    """The text of `_layout.h`."""
    lines = ["/* Generated from rocketstore's Python declarations by rocketstore/store/c_layout.py when the",
             " * compiled helpers are built. Do not edit: change the Python declaration. */",
             "#ifndef ROCKETSTORE_LAYOUT_H", "#define ROCKETSTORE_LAYOUT_H", ""]
    for name, value in LAYOUT.items():
        lines.append(f"#define {name} {_literal(value)}")
    orders = _field_orders()
    lines += ["", "/* rocketstore.store.prepare.Prepared, field by field */", "enum prepared_field {"]
    lines += [f"    P_{name.upper()} = {i}," for i, name in enumerate(orders["P"])]
    lines += ["};", f"#define PREPARED_FIELDS {len(orders['P'])}",
              "#define PREPARED_FIELD_NAMES " + ", ".join(f'"{name}"' for name in orders["P"]), "",
              "/* rocketstore.store.prepare.MESSAGE_FIELDS: the Message fields the compiled prepare reads */",
              "enum message_attribute {"]
    lines += [f"    M_{name.upper()} = {i}," for i, name in enumerate(orders["M"])]
    lines += ["};", f"#define MESSAGE_FIELDS {len(orders['M'])}", "",
              "/* rocketstore.log.entry_run.RunStop: why a run of decode_run stopped */", "enum run_state {"]
    lines += [f"    {name} = {value}," for name, value in _run_stops().items()]
    lines += ["};", "", "/* rocketstore.services.recovery.WalkStop: why walk_records stopped */", "enum walk_state {"]
    lines += [f"    {name} = {value}," for name, value in _walk_stops().items()]
    lines += ["};", "", "/* rocketstore.services.dispatch.RequestStop: why dispatch_requests stopped */",
              "enum requests_state {"]
    lines += [f"    {name} = {value}," for name, value in _request_stops().items()]
    lines += ["};", "", "/* rocketstore.services.dispatch.DispatchRequest, field by field */", "enum dispatch_field {"]
    lines += [f"    D_{name.upper()} = {i}," for i, name in enumerate(orders["D"])]
    lines += ["};", f"#define DISPATCH_FIELDS {len(orders['D'])}",
              "#define DISPATCH_FIELD_NAMES " + ", ".join(f'"{name}"' for name in orders["D"]),
              "#define MESSAGE_FIELD_NAMES " + ", ".join(f'"{name}"' for name in orders["M"]), "",
              "#define LAYOUT_ITEMS \\"]
    lines += [f"    X({name}) \\" for name in LAYOUT]
    lines += ["", "#endif", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        out.write(header())
