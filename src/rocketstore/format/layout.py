"""Binary layouts as data: each one a table of fields (name, `struct` format, meaning), from which its
`struct.Struct`, its field positions and widths, and the C header of the compiled helpers
(`store.c_layout`) all come. Java's integer limits, which bound most fields, are declared here once.

    UNIT = Layout("consume queue unit", (
        Field("commitlog physical offset", "q", "int64"),
        Field("message size", "i", "int32"),
        Field("tags hash code", "q", "int64"),
    ))
    UNIT.codec.size == 20; UNIT.position("message size") == 8; UNIT.width("tags hash code") == 8

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

    def c_defines(self, prefix: str) -> dict[str, int]:
        """`prefix`_SIZE and, per field, `prefix`_NAME_POS, _WIDTH and _FIELD (see the module's comment)."""
        out = {f"{prefix}_SIZE": self.size, f"{prefix}_FIELDS": len(self.fields)}
        for f in self.fields:
            name = c_name(f.name)
            out[f"{prefix}_{name}_POS"] = self.position(f.name)
            out[f"{prefix}_{name}_WIDTH"] = self.width(f.name)
            out[f"{prefix}_{name}_FIELD"] = self.index(f.name)
        return out

    def table(self) -> str:
        """The layout as a text table (pos, len, field, meaning), for docstrings and docs."""
        rows = [f"    {'pos':<5}{'len':<5}{'field':<28}meaning"]
        rows += [f"    {self.position(f.name):<5}{self.width(f.name):<5}{f.name:<28}{f.doc}".rstrip()
                 for f in self.fields]
        return "\n".join(rows)


def c_name(name: str) -> str:
    """A field's name in C: upper case, every other run of characters an underscore, no parenthesized
    remark ("timeDiff (seconds)" -> "TIMEDIFF")."""
    return re.sub(r"[^A-Z0-9]+", "_", re.sub(r"\(.*?\)", "", name).upper()).strip("_")
