"""The C header of the compiled helpers, derived from the Python declarations: `_layout.h`.

The layouts (record, consume-queue unit, index file: the last two as tables, `format.layout`), Java's
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

import inspect
import re
import struct
import sys
from types import ModuleType

from rocketstore.format import consume_queue, index, message, properties, sysflag
from rocketstore.format.layout import JAVA_LIMITS
from rocketstore.format.sysflag import SysFlag

_FIELD_LINE = re.compile(r'^\s*(?:[A-Z_]+\s*=\s*(?:struct\.Struct\()?\(?)?\s*(?:\+\s*)?f?"([^"]+)"\s*#\s*(.+?)\s*$')


def struct_fields(module: ModuleType, start: str, sizes: dict[str, int] | None = None) -> list[tuple[str, str]]:
    """(format piece, field name) of a layout declared as one commented piece per line, from the line
    that starts with `start` in `module`'s source to the closing parenthesis (`{name}` pieces take
    `sizes`)."""
    lines = inspect.getsource(module).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    fields = []
    for line in lines[first:]:
        found = _FIELD_LINE.match(line)
        if found:
            piece = found.group(1).format(**(sizes or {}))
            fields.append((piece, _c_name(found.group(2))))
        if line.strip().startswith(")"):
            break
    return fields


def _c_name(comment: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", re.sub(r"\(.*?\)", "", comment).upper()).strip("_")


def positions(prefix: str, fields: list[tuple[str, str]]) -> dict[str, int]:
    """`prefix`_NAME_POS -> byte position of each field (big-endian, no padding)."""
    out, fmt = {}, ">"
    for piece, name in fields:
        out[f"{prefix}_{name}_POS"] = struct.calcsize(fmt + piece.lstrip(">")) - struct.calcsize(piece.lstrip(">"))
        fmt += piece.lstrip(">")
    return out


def _record_positions() -> dict[str, int]:
    """Record header fields: from the record's start up to BORNHOST, then each part relative to the end
    of the IP before it (the born and store IPs are 4 or 16 bytes)."""
    head = struct_fields(message, "_FIXED_HEAD_FORMAT = (")
    rest = struct_fields(message, "    return struct.Struct(", {"born_ip_len": 4, "store_ip_len": 4})
    ip_at = [i for i, (piece, _) in enumerate(rest) if piece.endswith("s")]
    after_born, after_store = rest[ip_at[0] + 1:ip_at[1]], rest[ip_at[1] + 1:]
    out = positions("REC", head)
    out.update(positions("REC_AFTER_BORN_IP", after_born))
    out.update(positions("REC_AFTER_STORE_IP", after_store))
    out["REC_AFTER_BORN_IP_SIZE"] = struct.calcsize(">" + "".join(p for p, _ in after_born))
    out["REC_AFTER_STORE_IP_SIZE"] = struct.calcsize(">" + "".join(p for p, _ in after_store))
    out["REC_HEADER_V4_SIZE"] = message.header_struct(4, 4).size
    out["REC_V6_EXTRA"] = message.header_struct(16, 4).size - message.header_struct(4, 4).size
    assert struct.calcsize(">" + "".join(p.lstrip(">") for p, _ in head)) == message.FIXED_HEAD.size
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
        **_record_positions(),
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
