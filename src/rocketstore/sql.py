"""SQL over stores with DuckDB: one store (or a glob of stores) as the table `messages`.

    import rocketstore.sql
    con = rocketstore.sql.connect("/data/store")
    con.sql("SELECT topic, count(*) FROM messages GROUP BY topic").fetchall()

The table's rows and columns are `rocketstore.arrow.read`'s (`records.ARROW_SCHEMA`), read with the same
options, through the same read core. DuckDB scans it as an Arrow dataset and hands the scan the
columns the query needs and the part of the WHERE clause it can pass on, as an Arrow expression. The
top-level AND terms of that expression this module recognises (a column compared with a constant,
`IN`, `NOT IN`, `IS NULL`, `IS NOT NULL` on the integer and string columns) become the reader's
predicates (`scan.filters`): topics and queues left out of the plan, queue ranges cut to store-time
and queue-offset bounds, commitlog ranges to the `commitLogOffset` / `msgId` they may hold. The whole
expression is then applied to every batch by Arrow, so the rows DuckDB gets are exactly the ones it
asked for, whatever was pushed. What DuckDB cannot hand on (`LIKE`, functions of a column, `OR` across
columns, a join's filters) it evaluates itself after the read. `MessagesDataset.scans` records what
each scan was given and what it pushed.

Needs the `sql` extra (`pip install 'rocketstore[sql]'`: duckdb and pyarrow); without duckdb,
`connect` and `query` raise `SqlUnavailableError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

import rocketstore.arrow
from rocketstore.errors import RocketStoreError
from rocketstore.scan.filters import Predicate, predicates
from rocketstore.scan.records import ARROW_SCHEMA

if TYPE_CHECKING:
    import duckdb

__all__ = ["TABLE", "MessagesDataset", "ReadScanner", "Scan", "SqlUnavailableError", "connect", "describe",
           "duckdb_module", "filter_columns", "pushable", "query"]

TABLE = "messages"
"""The name of the table `connect` registers."""

INSTALL_HINT = "pip install 'rocketstore[sql]'"


class SqlUnavailableError(RocketStoreError, ImportError):
    """DuckDB is not installed: SQL over stores needs the `sql` extra."""


def duckdb_module() -> Any:
    """The duckdb module.

    Raises:
        SqlUnavailableError: duckdb is not installed, naming the extra to install.
    """
    try:
        import duckdb
    except ImportError as exc:
        raise SqlUnavailableError(
            f"SQL over stores needs DuckDB, which is not installed ({exc}); install it with: {INSTALL_HINT}"
        ) from None
    return duckdb


@dataclass(frozen=True)
class Scan:
    """One scan DuckDB asked for: the columns it wanted (None: all), its filter as Arrow prints it
    (None: no filter), and the predicates that went into the reader."""

    columns: tuple[str, ...] | None
    filter: str | None
    pushed: tuple[Predicate, ...]


class MessagesDataset(ds.InMemoryDataset):
    """The messages of stores as an Arrow dataset whose scans read the stores (DuckDB scans it).

    Each `scanner()` call plans a new read (`rocketstore.arrow.read`) with the predicates found in its
    filter and the columns it asks for and its filter tests (the read skips the others' work), and
    applies the filter and the projection to the batches as they come.
    """

    def __init__(self, path: str | Sequence[str], options: Mapping[str, Any] | None = None) -> None:
        super().__init__(ARROW_SCHEMA.empty_table())
        self.path = path
        self.options = dict(options or {})
        self.scans: list[Scan] = []
        rocketstore.arrow.check(path, self.options)

    def scanner(self, columns: Sequence[str] | None = None, filter: ds.Expression | None = None,
                **_: Any) -> ReadScanner:
        """A scanner over a new read of the stores: the rows `filter` holds true for, the `columns` asked.
        The read builds only those columns and the ones the filter tests."""
        pushed = pushable(filter)
        wanted = None if columns is None else tuple(columns)
        self.scans.append(Scan(wanted, None if filter is None else str(filter), pushed))
        read = None if wanted is None else [*wanted, *(c for c in filter_columns(filter) if c not in wanted)]
        return ReadScanner(rocketstore.arrow.read(self.path, self.options, filters=pushed, columns=read), wanted,
                           filter)


class ReadScanner:
    """What DuckDB takes from `MessagesDataset.scanner`: `to_reader()`, the read's batches with the
    filter applied and the columns selected, in the thread that consumes them (no thread of Arrow's
    own reads ahead from the Python generator, which a query that stops early, a LIMIT, would leave
    running)."""

    def __init__(self, reader: pa.RecordBatchReader, columns: tuple[str, ...] | None,
                 filter: ds.Expression | None) -> None:
        self.reader = reader
        self.columns = columns
        self.filter = filter

    def to_reader(self) -> pa.RecordBatchReader:
        """The batches as a record batch reader."""
        schema = ARROW_SCHEMA if self.columns is None else pa.schema([ARROW_SCHEMA.field(c) for c in self.columns])
        return pa.RecordBatchReader.from_batches(schema, self._batches())

    def _batches(self) -> Iterator[pa.RecordBatch]:
        for batch in self.reader:
            if self.filter is not None:
                batch = batch.filter(self.filter)
            if self.columns is not None:
                batch = batch.select(list(self.columns))
            if batch.num_rows:
                yield batch


def connect(path: str | Sequence[str], options: Mapping[str, Any] | None = None, *,
            connection: duckdb.DuckDBPyConnection | None = None, table: str = TABLE) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (a new in-memory one unless `connection` is given) with the stores at `path`
    (a root, comma-separated roots, glob patterns, or a list) registered as the table `table`
    (`messages`); `options` are `rocketstore.arrow.read`'s.

    Each query plans its read when it runs, so a query sees the messages stored by then.

    Raises:
        SqlUnavailableError: duckdb is not installed.
        rocketstore.errors.InvalidArgumentError: a malformed option, naming it, or a path that names no
            store directory.
        rocketstore.errors.StoreError: a path is not a store or does not fit the geometry.
    """
    duckdb = duckdb_module()
    con = connection if connection is not None else duckdb.connect()
    con.register(table, MessagesDataset(path, options))
    return con


def query(path: str | Sequence[str], sql: str, options: Mapping[str, Any] | None = None) -> pa.Table:
    """The result of `sql` over the table `messages` of the stores at `path`, as an Arrow table.

    Raises:
        SqlUnavailableError: duckdb is not installed.
        rocketstore.errors.InvalidArgumentError: a malformed option or a path that names no store.
        duckdb.Error: the SQL does not parse or bind, or fails as it runs.
    """
    con = connect(path, options)
    try:
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


# --- From DuckDB's Arrow filter to the reader's predicates -------------------------------------------

_COMPARE = re.compile(r"\((\w+) (==|!=|<=|>=|<|>) (-?\d+|\"(?:[^\"\\]|\\.)*\")\)", re.DOTALL)
_IN = re.compile(r"(invert\()?(?:if_else\(is_valid\((\w+)\), )?is_in\((\w+), \{value_set=\w+:\[(.*)\], "
                 r"null_matching_behavior=MATCH\}\)(?:, null\[bool\]\))?\)?", re.DOTALL)
_VALUE = re.compile(r"-?\d+|\"(?:[^\"\\]|\\.)*\"|null")
_NULL_TEST = re.compile(r"(is_valid|is_null)\((\w+)(?:, \{nan_is_null=false\})?\)")
_SQL_OP = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def pushable(expression: ds.Expression | None) -> tuple[Predicate, ...]:
    """The reader predicates of the top-level AND terms of a DuckDB scan filter that are a column of
    integers or strings compared with constants; other terms are left out (the filter as a whole is
    applied to the rows anyway). A term is taken only when the predicate, written back as Arrow's
    expression, prints exactly as the term did."""
    if expression is None:
        return ()
    found: list[Predicate] = []
    for term in _conjuncts(str(expression)):
        pred = _predicate(term)
        if pred is not None and str(_expression(pred)) == term:
            found.append(pred)
    return tuple(found)


def _conjuncts(text: str) -> list[str]:
    """The terms of `(a and b)` (nested), or `[text]`."""
    if text.startswith("(") and text.endswith(")") and _closing(text, 0) == len(text) - 1:
        split = _top_level(text[1:-1], " and ")
        if split is not None:
            return [*_conjuncts(text[1:split + 1]), *_conjuncts(text[split + 6:-1])]
    return [text]


def _unquoted(text: str, start: int = 0) -> Iterator[tuple[int, int]]:
    """(position, bracket depth before it) of each character of `text` from `start` that is outside
    double quotes (a backslash escapes the next character inside them)."""
    depth, quoted, i = 0, False, start
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        else:
            yield i, depth
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
        i += 1


def _closing(text: str, open_at: int) -> int:
    """Where the bracket opened at `open_at` closes (quotes skipped), or -1."""
    for i, depth in _unquoted(text, open_at):
        if depth == 1 and text[i] in ")]}":
            return i
    return -1


def _top_level(text: str, word: str) -> int | None:
    """The first place of `word` in `text` outside brackets and quotes."""
    for i, depth in _unquoted(text):
        if depth == 0 and text[i] not in "([{)]}" and text.startswith(word, i):
            return i
    return None


def _literal(token: str) -> Any:
    if token == "null":
        return None
    return json.loads(token) if token.startswith('"') else int(token)


def _predicate(term: str) -> Predicate | None:
    try:
        if m := _COMPARE.fullmatch(term):
            return predicates([(m[1], _SQL_OP[m[2]], _literal(m[3]))])[0]
        if m := _IN.fullmatch(term):
            values = [_literal(v) for v in _VALUE.findall(m[4])]
            return predicates([(m[3], "not in" if m[1] else "in", values)])[0]
        if m := _NULL_TEST.fullmatch(term):
            return predicates([(m[2], "is not null" if m[1] == "is_valid" else "is null")])[0]
    except (ValueError, json.JSONDecodeError):
        return None  # a column or value the reader's predicates do not take
    return None


def _expression(pred: Predicate) -> ds.Expression:
    """The Arrow expression DuckDB builds for the predicate."""
    column, op, value = pred
    field = ds.field(column)
    kind = ARROW_SCHEMA.field(column).type
    if op == "is null":
        return field.is_null()
    if op == "is not null":
        return field.is_valid()
    if op in ("in", "not in"):
        hit = pc.if_else(pc.is_valid(field), pc.is_in(field, value_set=pa.array(value, type=kind)),
                         pa.scalar(None, pa.bool_()))
        return ~hit if op == "not in" else hit
    scalar = pa.scalar(value, type=kind)
    compare = {"=": field == scalar, "!=": field != scalar, "<": field < scalar, "<=": field <= scalar,
               ">": field > scalar, ">=": field >= scalar}
    return compare[op]


_NAME = re.compile(r"\w+")


def filter_columns(expression: ds.Expression | None) -> list[str]:
    """The columns an Arrow filter may test, in schema order: every column name that appears as a word
    in its printed form (a name inside a quoted value too, which only builds a column more)."""
    if expression is None:
        return []
    words = set(_NAME.findall(str(expression)))
    return [name for name in ARROW_SCHEMA.names if name in words]


def describe(preds: Iterable[Predicate]) -> str:
    """Predicates as SQL-like text (`topic = 'A' AND storeTimestamp >= 5`), or `nothing`."""
    parts = []
    for column, op, value in preds:
        if value is None:
            parts.append(f"{column} {op.upper()}")
        elif isinstance(value, tuple):
            parts.append(f"{column} {op.upper()} ({', '.join(map(_sql_value, value))})")
        else:
            parts.append(f"{column} {op} {_sql_value(value)}")
    return " AND ".join(parts) or "nothing"


def _sql_value(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)
