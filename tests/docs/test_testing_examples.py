"""docs/testing.md's two client examples need a RocketMQ client in a venv of its own, so the docs runner
only shows them; they are the example project's tests (tests/testing/example_project), which
tests/testing/test_example_project.py runs with each real client. Here: the doc shows that code."""

from __future__ import annotations

import ast

from tests.conftest import REPO_ROOT
from tests.docs.blocks import doc_blocks

EXAMPLE_PROJECT = REPO_ROOT / "tests" / "testing" / "example_project"


def _code(text: str) -> str:
    """The module's code without its docstring and comments, in one spelling."""
    tree = ast.parse(text)
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        tree.body = tree.body[1:]
    return ast.unparse(tree)


def test_each_test_module_of_testing_md_is_a_module_of_the_example_project() -> None:
    examples = {path.name: _code(path.read_text(encoding="utf-8")) for path in EXAMPLE_PROJECT.glob("test_*.py")}
    shown = [block for block in doc_blocks(REPO_ROOT, REPO_ROOT / "docs" / "testing.md")
             if block.lang == "python" and block.text.startswith("# test_")]
    assert len(shown) == 2
    for block in shown:
        matches = [name for name, code in examples.items() if code == _code(block.text)]
        assert matches, f"{block.case_id}: no module of {EXAMPLE_PROJECT} holds this code:\n{block.text}"
