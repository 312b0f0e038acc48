"""Global options and the store they open.

`--json`, `--debug`, `--config FILE` and the geometry flags may be given before the subcommand
(`rocketstore --json topics STORE`) or after it (`rocketstore topics STORE --json`); both land in one
`CliState` that every command reads.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from rocketstore.cli._errors import UsageProblem

if TYPE_CHECKING:
    from rocketstore import MessageStore, StoreConfig

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

store_argument = click.argument("store", type=click.Path(file_okay=False, path_type=Path))
"""The STORE argument every subcommand but `demo` takes."""

# Geometry flag -> StoreConfig field; RocketMQ stores written with other than default sizes need them.
GEOMETRY_FLAGS: dict[str, str] = {
    "--commitlog-file-size": "commitlog_file_size",
    "--consume-queue-file-entries": "consume_queue_file_entries",
    "--index-hash-slots": "index_hash_slots",
    "--index-max-entries": "index_max_entries",
}
_GEOMETRY_HELP: dict[str, str] = {
    "commitlog_file_size": "Bytes per commitlog file (RocketMQ mappedFileSizeCommitLog).",
    "consume_queue_file_entries": "Entries per consume-queue file (mappedFileSizeConsumeQueue / 20).",
    "index_hash_slots": "Hash slots per index file (maxHashSlotNum).",
    "index_max_entries": "Entries per index file (maxIndexNum).",
}


@dataclass
class CliState:
    """What the global options said; shared by the group and every subcommand."""

    json_output: bool = False
    debug: bool = False
    config_file: Path | None = None
    geometry: dict[str, int] = field(default_factory=dict)

    def store_config(self) -> StoreConfig | None:
        """The StoreConfig the options describe, or None to let the store use its recorded geometry.

        Raises:
            UsageProblem: the config file cannot be read or names unknown settings.
        """
        if self.config_file is None and not self.geometry:
            return None
        from rocketstore import StoreConfig

        base = load_config_file(self.config_file) if self.config_file else StoreConfig()
        try:
            return base.with_geometry(self.geometry)
        except (TypeError, ValueError) as exc:
            raise UsageProblem(f"bad store geometry: {exc}") from exc

    def explicit_geometry(self) -> dict[str, tuple[int, str]]:
        """The geometry fields the options set themselves: field -> (value, the option that set it);
        a flag wins over the config file.

        Raises:
            UsageProblem: the config file cannot be read or names unknown settings.
        """
        given: dict[str, tuple[int, str]] = {}
        if self.config_file is not None:
            for name, value in config_file_geometry(self.config_file).items():
                given[name] = (value, f"--config {self.config_file}")
        flags = {name: flag for flag, name in GEOMETRY_FLAGS.items()}
        for name, value in self.geometry.items():
            given[name] = (value, f"{flags[name]} {value}")
        return given


def state() -> CliState:
    """The CliState of the command being run."""
    return click.get_current_context().ensure_object(CliState)


class _AliasedOption(click.Option):
    """An option that still answers to earlier names, which --help and error messages leave out."""

    def __init__(self, *args: Any, hidden_aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hidden_aliases = hidden_aliases

    def _without_aliases(self, method: Callable[[Any], T], ctx: click.Context | None) -> T:
        names = self.opts
        self.opts = [name for name in names if name not in self.hidden_aliases]
        try:
            return method(ctx)
        finally:
            self.opts = names

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        return self._without_aliases(super().get_help_record, ctx)

    def get_error_hint(self, ctx: click.Context | None) -> str:
        return self._without_aliases(super().get_error_hint, ctx)


def option(*names: str, aliases: tuple[str, ...] = (), **kwargs: Any) -> Callable[[F], F]:
    """`click.option` that also accepts `aliases`, earlier names of the option kept working but hidden
    (one name for one idea across commands: `--count` for "at most N", `--topic` for a topic filter)."""
    return click.option(*names, *aliases, cls=_AliasedOption, hidden_aliases=aliases, **kwargs)


def _set_flag(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value:  # an option left out below the subcommand must not undo one given above it
            setattr(ctx.ensure_object(CliState), name, value)

    return callback


def _set_geometry(ctx: click.Context, param: click.Parameter, value: int | None) -> None:
    if value is not None and param.name is not None:
        ctx.ensure_object(CliState).geometry[param.name] = value


def store_options(func: F) -> F:
    """Add `--config` and the geometry flags (the store's settings) to a group or command."""
    options = [
        click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
                     expose_value=False, callback=_set_flag("config_file"),
                     help="Store settings: rocketstore JSON, or a RocketMQ broker.conf."),
    ]
    for flag, name in GEOMETRY_FLAGS.items():
        options.append(click.option(flag, name, type=click.IntRange(min=1), expose_value=False,
                                    callback=_set_geometry, help=_GEOMETRY_HELP[name]))
    for option in reversed(options):
        func = option(func)
    return func


def global_options(func: F) -> F:
    """Add `--json`, `--debug` and the store options (`store_options`) to a group or command."""
    options = [
        click.option("--json", "json_output", is_flag=True, expose_value=False,
                     callback=_set_flag("json_output"),
                     help="Print JSON (stable snake_case field names) instead of tables."),
        click.option("--debug", is_flag=True, expose_value=False, callback=_set_flag("debug"),
                     help="Show the traceback of an error."),
    ]
    func = store_options(func)
    for option in reversed(options):
        func = option(func)
    return func


def load_config_file(path: Path) -> StoreConfig:
    """A StoreConfig from a JSON file (StoreConfig field names, flat or under "geometry" as in a store's
    config/rocketstore.json; or RocketMQ MessageStoreConfig names) or from a broker.conf.

    Raises:
        UsageProblem: the file is missing, unreadable or not understood.
    """
    from rocketstore import StoreConfig

    values = _config_values(path)
    known = {f.name for f in dataclasses.fields(StoreConfig)}
    try:
        if known & set(values):
            unknown = sorted(set(values) - known)
            if unknown:
                raise UsageProblem(f"config file {path}: unknown setting(s) {', '.join(map(repr, unknown))} "
                                   f"(known: {', '.join(sorted(known))})")
            return StoreConfig.from_dict(values)
        return StoreConfig.from_rocketmq({str(k): str(v) for k, v in values.items()})
    except (TypeError, ValueError) as exc:
        raise UsageProblem(f"config file {path}: {exc}") from exc


# Geometry field -> its name in a RocketMQ broker.conf.
_ROCKETMQ_GEOMETRY_NAMES = {
    "commitlog_file_size": "mappedFileSizeCommitLog",
    "consume_queue_file_entries": "mappedFileSizeConsumeQueue",
    "index_hash_slots": "maxHashSlotNum",
    "index_max_entries": "maxIndexNum",
}


def config_file_geometry(path: Path) -> dict[str, int]:
    """The geometry fields the config file at `path` sets itself (not the defaults it leaves in place).

    Raises:
        UsageProblem: the file is missing, unreadable or not understood.
    """
    values = _config_values(path)
    config = load_config_file(path)
    return {name: getattr(config, name) for name, theirs in _ROCKETMQ_GEOMETRY_NAMES.items()
            if name in values or theirs in values}


def _config_values(path: Path) -> dict[str, Any]:
    """The settings in a config file, as written (a store's `geometry` object flattened).

    Raises:
        UsageProblem: the file is missing, unreadable, or not JSON / properties.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageProblem(f"cannot read config file {path}: {exc.strerror}") from exc
    values: dict[str, Any]
    if path.suffix.lower() == ".json":
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageProblem(f"config file {path} is not JSON: {exc}") from exc
        if not isinstance(values, dict):
            raise UsageProblem(f"config file {path} must hold one JSON object")
    else:
        values = dict(_read_properties(text))
    if isinstance(values.get("geometry"), dict):  # the layout of a store's own config/rocketstore.json
        values = {**{k: v for k, v in values.items() if k != "geometry"}, **values["geometry"]}
    return values


def _read_properties(text: str) -> dict[str, str]:
    """`key=value` lines of a Java properties file (broker.conf); `#`/`!` comments skipped."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut > 0:
            values[line[:cut].strip()] = line[cut + 1 :].strip()
    return values


def check_store_dir(path: Path) -> Path:
    """`path` if it is a store directory (it has `commitlog/`).

    Raises:
        UsageProblem: there is no such directory, or it holds no store.
    """
    if not path.exists():
        raise UsageProblem(f"no store at {path}: no such directory")
    if not path.is_dir():
        raise UsageProblem(f"{path} is not a store directory")
    if not (path / "commitlog").is_dir():
        raise UsageProblem(f"{path} is not a store directory (it has no commitlog/)")
    return path


@contextmanager
def open_store(path: Path, *, read_only: bool = True, repair: bool = False) -> Iterator[MessageStore]:
    """Open the store at `path` with the options' geometry; read-only unless asked otherwise
    (`repair`: see `MessageStore.open`).

    Raises:
        UsageProblem: `path` holds no store (a writable open may create one in an empty folder).
        RocketStoreError: the store refused to open (locked, geometry mismatch, ...).
    """
    from rocketstore import MessageStore
    from rocketstore.cli._geometry import geometry_for

    creatable = not path.exists() or path.is_dir() and not any(path.iterdir())
    if read_only or not creatable:
        check_store_dir(path)
    config = geometry_for(path, read_only=read_only)
    with MessageStore.open(path, config, read_only=read_only, repair=repair) as store:
        for problem in store.recovery.state_files:  # the store opened anyway: say what it read instead
            saved = f"; its bytes are in {problem.saved_to}" if problem.saved_to else ""
            click.echo(f"rocketstore: note: {problem.file} is damaged ({problem.problem}); "
                       f"read {problem.used} instead{saved}", err=True)
        yield store


def require_queue(store: MessageStore, topic: str, queue_id: int | None = None) -> None:
    """Check that `topic` (and `queue_id`) exist in the store.

    Raises:
        UsageProblem: unknown topic or queue.
    """
    queues = store.queues()
    if topic not in queues:
        known = ", ".join(sorted(queues)) or "none"
        raise UsageProblem(f"unknown topic {topic!r} (topics in this store: {known})")
    if queue_id is not None and queue_id not in queues[topic]:
        known = ", ".join(str(q) for q in sorted(queues[topic]))
        raise UsageProblem(f"topic {topic!r} has no queue {queue_id} (queues: {known})")


def store_config_of(path: Path) -> StoreConfig:
    """The options' StoreConfig (completed from the files, see `geometry_for`), else the geometry the
    store at `path` recorded (else defaults).

    Raises:
        UsageProblem: `path` holds no store.
        RocketStoreError: the store refused to open.
    """
    from rocketstore.cli._geometry import geometry_for

    given = geometry_for(path, read_only=True)
    if given is not None:
        return given
    with open_store(path) as store:
        return store.config
