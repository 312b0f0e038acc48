"""Binary layouts as data: each one a table of fields (name, `struct` format, meaning), from which its
`struct.Struct`, its field positions and widths, the C header of the compiled helpers
(`store.c_layout`) and the byte tables of the docs and docstrings (`format.layout_docs`) all come.
Java's integer limits, which bound most fields, are declared here once.

    UNIT = Layout("consume queue unit", (
        Field("commitlog physical offset", "q", "int64"),
        Field("message size", "i", "int32"),
        Field("tags hash code", "q", "int64"),
    ))
    UNIT.codec.size == 20; UNIT.position("message size") == 8; UNIT.width("tags hash code") == 8

A record whose parts vary (the commitlog record: IPv4 or IPv6 hosts, length-prefixed body, topic and
properties) is one `Layout` per shape of its fixed part and a tuple of `Variable`s, the pieces that
follow it, each a count (its own `struct` format) then that many bytes.

In C a layout becomes `PREFIX_SIZE`, `PREFIX_FIELDS` (its number of fields) and, per field,
`PREFIX_NAME_POS` (its byte position), `PREFIX_NAME_WIDTH` (its bytes) and `PREFIX_NAME_FIELD` (its
index among the fields, for the tuples the Python side passes), NAME being the field's name in upper
case with every other run of characters an underscore.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

JAVA_INT_MIN = -(2**31)
JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MIN = -(2**63)
JAVA_LONG_MAX = 2**63 - 1
"""Java's int and long ranges: the ranges of RocketMQ's int32 and int64 fields."""

JAVA_LIMITS = {"JAVA_INT_MIN": JAVA_INT_MIN, "JAVA_INT_MAX": JAVA_INT_MAX, "JAVA_LONG_MIN": JAVA_LONG_MIN,
               "JAVA_LONG_MAX": JAVA_LONG_MAX}


class Field(NamedTuple):
    """One field of a layout: its name (RocketMQ's), its `struct` format code and what it holds."""

    name: str
    format: str
    doc: str = ""


class Variable(NamedTuple):
    """A variable-length field: its byte count (`length`, a `struct` format code) then that many bytes."""

    name: str
    length: str
    doc: str = ""

    def length_field(self) -> Field:
        """The count before the bytes, as a field of its own (NAME + "LENGTH", as RocketMQ calls it)."""
        return Field(f"{self.name}LENGTH", self.length, f"bytes of {self.name}")

    @property
    def length_width(self) -> int:
        """Bytes of the count."""
        return struct.calcsize(">" + self.length)


@dataclass(frozen=True)
class Layout:
    """A fixed-size binary layout, field after field with no padding (`byte_order` `>`: big-endian, as
    every RocketMQ file is; `=`: native, for buffers that stay in memory)."""

    title: str
    fields: tuple[Field, ...]
    byte_order: str = ">"
    codec: struct.Struct = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "codec", struct.Struct(self.byte_order + "".join(f.format for f in self.fields)))

    @property
    def size(self) -> int:
        """Bytes of the whole layout."""
        return self.codec.size

    def position(self, name: str) -> int:
        """Byte position of field `name`."""
        at = 0
        for f in self.fields:
            if f.name == name:
                return at
            at += struct.calcsize(self.byte_order + f.format)
        raise KeyError(f"{self.title} has no field {name!r}")

    def width(self, name: str) -> int:
        """Bytes of field `name`."""
        return struct.calcsize(self.byte_order + self._field(name).format)

    def index(self, name: str) -> int:
        """Index of field `name` among the fields (in a tuple `struct.unpack` returns)."""
        return self.fields.index(self._field(name))

    def _field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.title} has no field {name!r}")

    def part(self, start: str, stop: str | None = None) -> Layout:
        """The fields from `start` up to `stop` (excluded; None: to the end) as a layout of their own,
        positions counted from `start`."""
        first, last = self.index(start), len(self.fields) if stop is None else self.index(stop)
        return Layout(f"{self.title}, {start} on", self.fields[first:last], self.byte_order)

    def c_defines(self, prefix: str) -> dict[str, int]:
        """`prefix`_SIZE and, per field, `prefix`_NAME_POS, _WIDTH and _FIELD (see the module's comment)."""
        out = {f"{prefix}_SIZE": self.size, f"{prefix}_FIELDS": len(self.fields)}
        for f in self.fields:
            name = c_name(f.name)
            out[f"{prefix}_{name}_POS"] = self.position(f.name)
            out[f"{prefix}_{name}_WIDTH"] = self.width(f.name)
            out[f"{prefix}_{name}_FIELD"] = self.index(f.name)
        return out

    def codec_of(self, name: str) -> struct.Struct:
        """The `struct.Struct` of field `name` alone."""
        return struct.Struct(self.byte_order + self._field(name).format)

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(pos, len, field, meaning) of each field, for `text_table` and `markdown_table`."""
        return [(str(self.position(f.name)), str(self.width(f.name)), f.name, f.doc) for f in self.fields]

    def table(self) -> str:
        """The layout as a text table (pos, len, field, meaning), for docstrings."""
        return text_table(self.rows())

    def markdown(self) -> str:
        """The layout as a markdown table (pos, len, field, meaning), for the docs."""
        return markdown_table(self.rows())


def text_table(rows: list[tuple[str, str, str, str]]) -> str:
    """Rows of (pos, len, field, meaning) as an indented text table, each column at least as wide as
    Layout.table's (5, 5, 28)."""
    widths = [max([minimum - 2] + [len(row[i]) for row in rows]) + 2 for i, minimum in enumerate((5, 5, 28))]
    lines = []
    for row in [("pos", "len", "field", "meaning"), *rows]:
        cells = "".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        lines.append(f"    {cells}{row[3]}".rstrip())
    return "\n".join(lines)


def markdown_table(rows: list[tuple[str, str, str, str]]) -> str:
    """Rows of (pos, len, field, meaning) as a markdown table, the field names as code."""
    lines = ["| pos | len | field | meaning |", "|---:|---:|---|---|"]
    lines += [f"| {pos} | {width} | `{name}` | {doc} |" for pos, width, name, doc in rows]
    return "\n".join(lines)


def c_name(name: str) -> str:
    """A field's name in C: upper case, every other run of characters an underscore, no parenthesized
    remark ("timeDiff (seconds)" -> "TIMEDIFF")."""
    return re.sub(r"[^A-Z0-9]+", "_", re.sub(r"\(.*?\)", "", name).upper()).strip("_")
