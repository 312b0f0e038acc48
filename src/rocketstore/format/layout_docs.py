"""The byte tables of the docs and of the format modules' docstrings, drawn from the layouts (`format.layout`)
so that no table is written by hand.

In a markdown file a table sits between `<!-- layout: NAME -->` and `<!-- /layout -->` (NAME one of
`DOC_TABLES`); a module's docstring holds the text tables `DOCSTRING_TABLES` gives for it. Rewrite the
markdown tables after changing a layout with

    python -m rocketstore.format.layout_docs docs/format.md

(`--check` only says which tables differ, exit status 1 when one does).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from rocketstore.format import checkpoint, consume_queue, index, message, msgid
from rocketstore.format.layout import markdown_table, text_table


def _record_markdown() -> str:
    return markdown_table(message.record_rows()) + "\n\n" + message.record_legend()


DOC_TABLES: dict[str, Callable[[], str]] = {
    "commitlog-record": _record_markdown,
    "consume-queue-unit": consume_queue.UNIT_LAYOUT.markdown,
    "index-file-header": index.HEADER_LAYOUT.markdown,
    "index-slot": index.SLOT_LAYOUT.markdown,
    "index-entry": index.ENTRY_LAYOUT.markdown,
    "checkpoint": checkpoint.LAYOUT.markdown,
    "message-id-ipv4": msgid.IPV4_LAYOUT.markdown,
    "message-id-ipv6": msgid.IPV6_LAYOUT.markdown,
}
"""NAME of a `<!-- layout: NAME -->` block -> its markdown."""

DOCSTRING_TABLES: dict[ModuleType, Callable[[], list[str]]] = {
    message: lambda: [text_table(message.record_rows())],
    consume_queue: lambda: [consume_queue.UNIT_LAYOUT.table()],
    index: lambda: [index.HEADER_LAYOUT.table(), index.SLOT_LAYOUT.table(), index.ENTRY_LAYOUT.table()],
    checkpoint: lambda: [checkpoint.LAYOUT.table()],
    msgid: lambda: [msgid.IPV4_LAYOUT.table(), msgid.IPV6_LAYOUT.table()],
}
"""A format module -> the text tables its docstring shows."""

_BLOCK = re.compile(r"(<!-- layout: ([a-z0-9-]+) -->\n)(.*?)(<!-- /layout -->)", re.DOTALL)


def _content(name: str) -> str:
    return f"\n{DOC_TABLES[name]()}\n\n"


def render(text: str) -> str:
    """`text` with every layout block's content replaced by the table of its layout.

    Raises:
        KeyError: a block names no layout of `DOC_TABLES`.
    """
    return _BLOCK.sub(lambda m: f"{m.group(1)}{_content(m.group(2))}{m.group(4)}", text)


def stale(text: str) -> list[str]:
    """The names of the layout blocks of `text` whose table is not the layout's."""
    return [m.group(2) for m in _BLOCK.finditer(text) if m.group(3) != _content(m.group(2))]


def blocks(text: str) -> list[str]:
    """The names of the layout blocks of `text`, in order."""
    return [m.group(2) for m in _BLOCK.finditer(text)]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    status = 0
    for name in (arg for arg in argv if arg != "--check"):
        path = Path(name)
        text = path.read_text(encoding="utf-8")
        if check:
            for table in stale(text):
                print(f"{path}: table {table!r} differs from its layout")
                status = 1
        elif render(text) != text:
            path.write_text(render(text), encoding="utf-8")
            print(f"{path}: tables rewritten")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
