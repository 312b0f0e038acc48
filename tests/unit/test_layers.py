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
