"""`Prepared`'s field order is declared once, by the NamedTuple; the C code reads it from the generated
header (tests/unit/test_speedups.py), and the three places in Python that build or unpack it by position
for speed name each position after its field, held here to the declaration."""

from __future__ import annotations

import ast
import inspect

from rocketstore.store import append_run, prepare, write_path
from rocketstore.store.prepare import Prepared


def _function(module: object, name: str) -> ast.FunctionDef:
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _unpacked_names(function: ast.FunctionDef) -> list[str]:
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) \
                and len(node.targets[0].elts) == len(Prepared._fields):
            return [e.id for e in node.targets[0].elts if isinstance(e, ast.Name)]
    raise AssertionError(f"{function.name} unpacks no Prepared")


def test_positional_unpacks_name_every_field_in_order():
    for module, name in ((write_path, "_put_one_branch"), (write_path, "_put_one_py"), (write_path, "_append_record"),
                         (append_run, "pack_run_py")):
        names = _unpacked_names(_function(module, name))
        assert len(names) == len(Prepared._fields)
        assert all(n in ("_", field) for n, field in zip(names, Prepared._fields, strict=True)), (name, names)


def test_prepare_py_builds_prepared_from_locals_named_after_its_fields():
    call = next(n for n in ast.walk(_function(prepare, "prepare_py"))
                if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "new_prepared")
    assert [a.id for a in call.args if isinstance(a, ast.Name)] == list(Prepared._fields)
