"""The one-way import rule between layers (format <- storage <- log <- services <- store <- adapters), the
remoting codec and client (`protocol`) on the codecs only, adapters reaching the store only through
`rocketstore.store` (and `rocketstore.store.files`), and adapters importing one another only from the
command line and the test fixture, which put them together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "rocketstore"
ORDER = ["format", "storage", "log", "services", "store"]
ADAPTERS = {"spark", "cli", "broker", "report", "testing"}
READ_CORE = {"scan", "arrow"}  # the read core Spark's source and rocketstore.arrow share, and the Arrow reader
BASE = {"errors", "config", "_types", "_readable", "native", "kernels", "_speedups"}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "rocketstore" or len(parts) < 2:
        return None
    return parts[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("layer", ORDER[:-1])
def test_lower_layers_never_import_higher_ones(layer):
    allowed = set(ORDER[: ORDER.index(layer) + 1]) | BASE
    for path in (SRC / layer).rglob("*.py"):
        for module in _imports(path):
            target = _layer(module)
            if target is not None:
                assert target in allowed, f"{path.relative_to(SRC)} imports {module}"


def test_the_core_never_imports_an_adapter():
    core = [SRC / f"{name}.py" for name in ("config", "errors", "message", "results", "native", "_types", "__init__")]
    for layer in ORDER:
        core.extend((SRC / layer).rglob("*.py"))
    for path in core:
        for module in _imports(path):
            assert _layer(module) not in ADAPTERS, f"{path.relative_to(SRC)} imports {module}"


def test_every_top_level_module_has_a_place_in_the_layers():
    placed = {"message", "results", "__init__", "__main__", "arrow", "sql"} | BASE
    for path in SRC.glob("*.py"):
        assert path.stem in placed, f"{path.name}: name its layer in tests/unit/test_layers.py"
    for path in SRC.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            assert path.name in set(ORDER) | ADAPTERS | READ_CORE | {"protocol"}, f"{path.name}/: name its layer"


def test_the_read_core_stands_on_the_store_alone():
    """`scan` and `arrow` reach the store as adapters do (its public surface), import no adapter and no
    pyspark: Spark's source is an adapter over them, not the other way round."""
    paths = [*(SRC / "scan").rglob("*.py"), SRC / "arrow.py"]
    for path in paths:
        for module in _imports(path):
            where = f"{path.relative_to(SRC)} imports {module}"
            assert _layer(module) not in ADAPTERS | {"log", "services", "storage"}, where
            assert module.split(".")[0] != "pyspark", where


def test_the_sql_engine_is_an_adapter_over_the_read_core():
    """`rocketstore.sql` puts DuckDB over `rocketstore.arrow`: it reads through the read core only, never
    the store's layers, and no other adapter imports it but the command line."""
    for module in _imports(SRC / "sql.py"):
        where = f"sql.py imports {module}"
        assert _layer(module) not in ADAPTERS | {"log", "services", "storage", "store"}, where
        assert module.split(".")[0] != "pyspark", where
    for adapter in sorted(ADAPTERS - {"cli"}):
        for path in (SRC / adapter).rglob("*.py"):
            assert "rocketstore.sql" not in _imports(path), f"{path.relative_to(SRC)} imports rocketstore.sql"


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_adapters_reach_the_store_through_its_public_surface(adapter):
    """Adapters use `rocketstore.store` (MessageStore, and `store.files` for tools that work on the files)
    and the pure codecs of `format`, never the store's own layers (log, services, storage)."""
    below = {"log", "services", "storage"}
    for path in (SRC / adapter).rglob("*.py"):
        for module in _imports(path):
            assert _layer(module) not in below, f"{path.relative_to(SRC)} imports {module}"


@pytest.mark.parametrize("adapter", sorted(ADAPTERS - {"cli", "testing"}))
def test_adapters_import_no_other_adapter(adapter):
    """The broker (both protocols), Spark and the report stand side by side; the command line (`cli`, and
    a package's `__main__`) puts them together, and so does the test fixture (`testing`), which starts
    the broker's command."""
    for path in (SRC / adapter).rglob("*.py"):
        if path.name == "__main__.py":
            continue
        for module in _imports(path):
            target = _layer(module)
            assert target == adapter or target not in ADAPTERS, f"{path.relative_to(SRC)} imports {module}"


def test_the_protocol_stands_on_the_codecs_only():
    allowed = {"protocol", "format"} | BASE
    for path in (SRC / "protocol").rglob("*.py"):
        for module in _imports(path):
            target = _layer(module)
            if target is not None:
                assert target in allowed, f"{path.relative_to(SRC)} imports {module}"


def test_the_top_level_modules_stand_on_the_codecs_alone():
    """`config`, `results`, `message`, `errors` and the other top-level modules every layer uses import
    nothing above the codecs (`format`) but one another: a layer that imports them never reaches, through
    them, a layer above itself."""
    allowed = {"format", "message", "results"} | BASE
    for name in ("config", "results", "message", "errors", "_types", "native", "_readable", "kernels"):
        for module in _imports(SRC / f"{name}.py"):
            target = _layer(module)
            if target is not None:
                assert target in allowed, f"{name}.py imports {module}"


def test_only_native_loads_the_compiled_module():
    """The compiled module is loaded in one place (`native`, which picks it or none once at import);
    `kernels` names its types for the checker only. Everything else reaches it through those two."""
    for path in SRC.rglob("*.py"):
        if path.name in ("native.py", "kernels.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            named = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.endswith("_speedups") for n in named), f"{path.relative_to(SRC)} imports _speedups"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                assert node.func.attr != "import_module" or "_speedups" not in ast.unparse(node), path


STORE_PARTS = SRC / "store"
FOREIGN_WRITES = {
    # (module, target): why a store part sets an attribute of an object that is not its own
    ("message_store.py", "method.__doc__"): "a facade method takes the docstring of the part's method",
    ("message_store.py", "store.geometry_inferred"): "the store `open` made",
    ("message_store.py", "self.recovery.state_files"): "the recovery report the open made",
    ("message_store.py", "self.index.on_file_flushed"): "the index's callback, wired at the open",
    ("message_store.py", "queue_flush.logics_timestamp"): "the queue flush's checkpoint time, set per queue entry",
    ("message_store.py", "self.checkpoint.values.index_msg_timestamp"): "the checkpoint the facade's flush writes",
    ("message_store.py", "self.checkpoint.values.physic_msg_timestamp"): "the checkpoint the facade's flush writes",
    ("message_store.py", "self.checkpoint.values.logics_msg_timestamp"): "the checkpoint the facade's flush writes",
    ("background.py", "self.flush.before_sync"): "the group commit the part made drains put_nowait's queue",
    ("background.py", "service.on_error"): "the services the part made",
    ("open_recovery.py", "report.odd_files"): "the recovery report the part fills",
    ("open_recovery.py", "report.queue_entries_dispatched"): "the recovery report the part fills",
    ("open_recovery.py", "report.index_records_dispatched"): "the recovery report the part fills",
    ("pending_put.py", "pending._service"): "a PendingPut the module's own class method makes",
    ("pending_put.py", "pending._deadline"): "a PendingPut the module's own class method makes",
    ("pending_put.py", "pending._result"): "a PendingPut the module's own code settles",
    ("pending_put.py", "pending._final"): "a PendingPut the module's own code settles",
    ("pending_put.py", "pending._error"): "a PendingPut the module's own code settles",
}


def _foreign_writes(path: Path) -> set[tuple[str, str]]:
    """(module, target) of every assignment in `path` to an attribute of anything but `self` itself."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(one, ast.Attribute) and not (isinstance(one.value, ast.Name) and one.value.id == "self"):
                    found.add((path.name, ast.unparse(one)))
    return found


def test_the_store_is_parts_that_own_their_state():
    """`MessageStore` is one class over parts (no mixins), no part imports the facade, and a part sets
    attributes of itself only: the other parts' state changes through their methods. The few writes into
    another object that remain are named here, each with its reason."""
    from rocketstore.store import MessageStore

    assert MessageStore.__bases__ == (object,)
    found: set[tuple[str, str]] = set()
    for path in STORE_PARTS.glob("*.py"):
        if path.name != "message_store.py" and path.name != "__init__.py":
            assert "rocketstore.store.message_store" not in _imports(path), f"{path.name} imports the facade"
        found |= _foreign_writes(path)
    assert found - FOREIGN_WRITES.keys() == set(), "a store part sets another object's attribute"
    assert FOREIGN_WRITES.keys() - found == set(), "listed writes that are gone: take them off the list"
