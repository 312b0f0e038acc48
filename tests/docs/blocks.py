"""The code blocks of the user docs, as the docs runner sees them: extraction, console transcripts and the
output-matching rule. Pure functions over text; running them is `runner.py`'s job.

What is a block
    A fenced block (```lang or ~~~lang, indented or not) of README.md or docs/*.md. Blocks of the
    languages in `RUN_LANGUAGES` are run; every other language (text, json, toml, ini, yaml, none) is
    output or configuration and is only shown.

Markers
    The line right before the opening fence may be an HTML comment naming markers, e.g.
    `<!-- illustrative -->` (the block is only shown: it needs a running server, Java, the network or a
    path of the reader's machine) or `<!-- spark -->` (it starts Spark: the test carries the suite's
    `spark` marker and a longer timeout). A comment there naming anything else is an error, so a typo
    never turns a block into one that silently runs or silently does not.

Console blocks
    A line starting with `$ ` is a command; a command line ending in a backslash continues on the next
    line. Every other line is the expected output of the command above it: stdout and stderr as a
    terminal shows them, in the order written. A command with no line under it must print nothing.
    The output IS compared, line by line, after trailing spaces and trailing empty lines are dropped:
    - a line that is only `...` stands for any number of lines (none included);
    - `...` inside a line stands for any text on that line (a duration, a temporary path);
    - everything else must be equal. Rich's own shortening of a table cell is the character `…`, which
      is compared like any other.
    A console block without a command is refused (write ```text for output alone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN_LANGUAGES = frozenset({"python", "bash", "sh", "console"})
MARKERS = frozenset({"illustrative", "spark"})

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)")
_MARKER_COMMENT = re.compile(r"^\s*<!--\s*(?P<words>[\w\s-]*?)\s*-->\s*$")
ANY_LINES = "..."


class DocBlockError(ValueError):
    """A block the runner cannot take as written (an unknown marker, an unclosed fence, a console block
    without a command)."""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is (`doc` relative to the repository root, `line` of its opening
    fence, 1-based), its language, its text (fence indentation removed) and its markers."""

    doc: str
    line: int
    lang: str
    text: str
    markers: frozenset[str]

    @property
    def case_id(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang in RUN_LANGUAGES and "illustrative" not in self.markers


@dataclass(frozen=True)
class ConsoleStep:
    """A command of a console block (continuation lines joined with newlines, as bash reads them) and
    the output lines shown under it."""

    command: str
    expected: tuple[str, ...]


def _markers(doc: str, line_no: int, previous: str) -> frozenset[str]:
    found = _MARKER_COMMENT.match(previous)
    if found is None:
        return frozenset()
    words = frozenset(found.group("words").split())
    unknown = words - MARKERS
    if unknown:
        raise DocBlockError(f"{doc}:{line_no}: unknown block marker(s) {sorted(unknown)} "
                            f"(known: {sorted(MARKERS)})")
    return words


def _dedent(line: str, indent: str) -> str:
    return line[len(indent):] if line.startswith(indent) else line.lstrip(" \t")


def extract_blocks(text: str, doc: str) -> list[Block]:
    """Every fenced block of the Markdown `text` of `doc`, in order.

    Raises:
        DocBlockError: a fence that is never closed, or an unknown marker.
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening.group("indent"), opening.group("fence")
        markers = _markers(doc, i + 1, lines[i - 1] if i > 0 else "")
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if closing and closing.group("fence").startswith(fence[0]) and len(closing.group("fence")) >= len(fence) \
                    and not closing.group("lang"):
                break
            body.append(_dedent(lines[j], indent))
            j += 1
        else:
            raise DocBlockError(f"{doc}:{i + 1}: the {fence} block opened here is never closed")
        blocks.append(Block(doc, i + 1, opening.group("lang").lower(), "\n".join(body) + "\n", markers))
        i = j + 1
    return blocks


def doc_blocks(root: Path, doc: Path) -> list[Block]:
    """The blocks of one Markdown file under `root`."""
    return extract_blocks(doc.read_text(encoding="utf-8"), doc.relative_to(root).as_posix())


def user_docs(root: Path) -> list[Path]:
    """README.md and every docs/*.md: the files whose blocks the suite runs."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def console_steps(block: Block) -> list[ConsoleStep]:
    """The commands of a console block and the output shown under each.

    Raises:
        DocBlockError: the block holds no `$ ` line, or output comes before the first one.
    """
    steps: list[ConsoleStep] = []
    command: list[str] = []
    expected: list[str] = []
    continuing = False
    for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
        if continuing:
            command.append(line)
            continuing = line.endswith("\\")
            continue
        if line.startswith("$ ") or line == "$":
            if command:
                steps.append(ConsoleStep("\n".join(command), tuple(expected)))
            command, expected = [line[2:]], []
            continuing = line.endswith("\\")
        elif command:
            expected.append(line)
        elif line.strip():
            raise DocBlockError(f"{block.doc}:{number}: output before the first `$ ` command of the console block")
    if command:
        steps.append(ConsoleStep("\n".join(command), tuple(expected)))
    if not steps:
        raise DocBlockError(f"{block.case_id}: a console block without a `$ ` command (use ```text for output alone)")
    return steps


def _trimmed(lines: list[str] | tuple[str, ...]) -> list[str]:
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def _line_pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in expected.split(ANY_LINES)) + r"\Z", re.DOTALL)


def output_matches(expected: list[str] | tuple[str, ...], actual: list[str] | tuple[str, ...]) -> bool:
    """Whether `actual` output lines are what `expected` shows, by the rule of the module docstring."""
    want, got = _trimmed(expected), _trimmed(actual)
    patterns = [None if line.strip() == ANY_LINES else _line_pattern(line) for line in want]

    def match(w: int, g: int) -> bool:
        # iterative over the plain lines, recursive only at an any-lines wildcard
        while w < len(patterns):
            pattern = patterns[w]
            if pattern is None:
                return any(match(w + 1, k) for k in range(g, len(got) + 1))
            if g >= len(got) or not pattern.match(got[g]):
                return False
            w, g = w + 1, g + 1
        return g == len(got)

    return match(0, 0)
