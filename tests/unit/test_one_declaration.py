"""Java's int and long limits are declared once, in `rocketstore.format.layout`: no other Python module
writes them as a number or an expression, and the C sources take them from the generated header."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rocketstore.format.layout import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN

SRC = Path(__file__).resolve().parents[2] / "src" / "rocketstore"
DECLARED_IN = SRC / "format" / "layout.py"
LIMITS = {JAVA_INT_MAX: "JAVA_INT_MAX", JAVA_INT_MIN: "JAVA_INT_MIN", JAVA_LONG_MAX: "JAVA_LONG_MAX",
          JAVA_LONG_MIN: "JAVA_LONG_MIN", JAVA_LONG_MAX + 1: "JAVA_LONG_MAX + 1"}
MASKS = {"CRC_MASK"}
"""Names bound to a limit's value that mean something else (CRC_MASK: the top bit cleared, a mask)."""
C_NOT_JAVA = {"columns.c": "INT32_MAX"}
"""C files whose INT32_MAX is no Java field's limit (columns.c: Arrow's int32 offsets)."""
C_LIMIT = re.compile(r"\b(?:2147483647|0x7FFFFFFF|9223372036854775807|0x7FFFFFFFFFFFFFFF)[uUlL]*\b"
                     r"|\bINT32_M(?:AX|IN)\b", re.IGNORECASE)


def _value(node: ast.expr) -> int | None:
    """The int a constant expression of literals stands for (`2**31 - 1`, `-(2**63)`, `1 << 63`), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.Sub, ast.Add, ast.LShift)):
        left, right = _value(node.left), _value(node.right)
        if left is None or right is None or (isinstance(node.op, (ast.Pow, ast.LShift)) and not 0 <= right <= 64):
            return None
        return {ast.Pow: left**right, ast.Sub: left - right, ast.Add: left + right,
                ast.LShift: left << right}[type(node.op)]
    return None


def _mask_names(tree: ast.Module) -> set[int]:
    """ids of the value nodes assigned to a name of MASKS."""
    out = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if node_value := getattr(node, "value", None):
            if any(isinstance(t, ast.Name) and t.id in MASKS for t in targets):
                out |= {id(n) for n in ast.walk(node_value)}
    return out


def java_limits_written_out(source: str) -> list[tuple[int, str]]:
    """(line, what) of every expression of literals in `source` whose value is one of Java's limits."""
    tree = ast.parse(source)
    masks, found, inside = _mask_names(tree), [], set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr) or id(node) in inside or id(node) in masks:
            continue
        value = _value(node)
        if value in LIMITS:
            found.append((node.lineno, f"{ast.unparse(node)} (= {LIMITS[value]})"))
            inside |= {id(n) for n in ast.walk(node)}
    return sorted(found)


def test_no_python_module_writes_a_java_limit_out():
    offenders = [f"{path.relative_to(SRC)}:{line}: {what}" for path in sorted(SRC.rglob("*.py")) if path != DECLARED_IN
                 for line, what in java_limits_written_out(path.read_text(encoding="utf-8"))]
    assert offenders == [], "import them from rocketstore.format.layout:\n" + "\n".join(offenders)


def test_no_c_source_writes_a_java_limit_out():
    offenders = [f"{path.name}:{n}: {line.strip()}" for path in sorted((SRC / "_c").glob("*.[ch]"))
                 if path.name != "_layout.h"  # generated from format.layout
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if any(found != C_NOT_JAVA.get(path.name) for found in C_LIMIT.findall(line))]
    assert offenders == [], "use JAVA_INT_MAX ... of _layout.h:\n" + "\n".join(offenders)


@pytest.mark.parametrize(("source", "found"), [
    ("X = 2**31 - 1", [(1, "2 ** 31 - 1 (= JAVA_INT_MAX)")]),
    ("X = -(2**63)", [(1, "-2 ** 63 (= JAVA_LONG_MIN)")]),
    ("X = 2147483647", [(1, "2147483647 (= JAVA_INT_MAX)")]),
    ("X = 0x7FFFFFFF", [(1, "2147483647 (= JAVA_INT_MAX)")]),
    ("def f(end=1 << 63):\n    return -2147483648", [(1, "1 << 63 (= JAVA_LONG_MAX + 1)"),
                                                      (2, "-2147483648 (= JAVA_INT_MIN)")]),
    ("X = 2**32 - 1\nY = 1 << 62", []),
    ("CRC_MASK = 0x7FFFFFFF", []),
    ('X = "2**31 - 1"', []),
])
def test_the_check_finds_a_limit_in_any_spelling_and_spares_masks_and_text(source, found):
    assert java_limits_written_out(source) == found


@pytest.mark.parametrize(("line", "found"), [
    ("if (n > 2147483647LL) {", ["2147483647LL"]),
    ("mask = 0x7fffffffu;", ["0x7fffffffu"]),
    ("return s == INT32_MIN ? 0 : s;", ["INT32_MIN"]),
    ("long long x = 0x7FFFFFFFFFFFFFFFLL;", ["0x7FFFFFFFFFFFFFFFLL"]),
    ("if (n > JAVA_INT_MAX || n < 21474836470) {", []),
])
def test_the_c_check_finds_the_limits_with_any_suffix(line, found):
    assert C_LIMIT.findall(line) == found
