"""Row filters of a read: `(column, op, value)` predicates, what they let a plan skip, and their exact
test on record batches.

A predicate is a tuple `(column, op, value)` over a column of `records.ARROW_SCHEMA` of a scalar type
(not `keys`, `properties`, `body`):

* `=`, `!=`, `<`, `<=`, `>`, `>=` with an int (integer columns) or a str (string columns);
* `in`, `not in` with a list or tuple of them (None allowed, as SQL's `IN (..., NULL)`);
* `is null`, `is not null` with no value (None).

A list of predicates is their AND, with SQL's rule for nulls: a row passes when every predicate is
true, so a null comparison drops the row. `Prune.of` derives what a plan may skip from the predicates
on `topic`, `queueId`, `queueOffset`, `commitLogOffset`, `storeTimestamp`, `msgId` (the offset
message id carries the record's physical offset) and `tags` (`=` and `in`: the consume-queue entries'
tags codes, Java hash codes, so a match is only a candidate); a prune only ever leaves out rows that
some predicate drops. `mask` is the exact test of every predicate on a record batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rocketstore.format.javahash import tags_code
from rocketstore.format.layout import JAVA_LONG_MAX, JAVA_LONG_MIN
from rocketstore.scan.arrays import FALSE, NULL_BOOL, from_values, scalar
from rocketstore.scan.records import FIELDS

__all__ = ["EVERYTHING", "Interval", "Predicate", "Prune", "mask", "predicates"]

Predicate = tuple[str, str, Any]
"""`(column, op, value)`."""

_LONG_MIN, _LONG_MAX = JAVA_LONG_MIN, JAVA_LONG_MAX
_INT_COLUMNS = frozenset(name for name, kind, _ in FIELDS if pa.types.is_integer(kind))
_STRING_COLUMNS = frozenset(name for name, kind, _ in FIELDS if pa.types.is_string(kind)) | {"broker"}
_NEVER_NULL = frozenset({"topic", "queueId", "queueOffset", "commitLogOffset", "storeTimestamp", "msgId"})
_COMPARISONS = frozenset({"=", "!=", "<", "<=", ">", ">="})
OPS = _COMPARISONS | {"in", "not in", "is null", "is not null"}
"""The operators a predicate may use."""
_MSG_ID = re.compile(r"(?:[0-9A-F]{16}|[0-9A-F]{40})[0-9A-F]{16}")  # IPv4 or IPv6 store host + offset


@dataclass(frozen=True)
class Interval:
    """Integers `[lo, hi)`; None is unbounded."""

    lo: int | None = None
    hi: int | None = None

    def meet(self, lo: int | None, hi: int | None) -> Interval:
        """The intersection with `[lo, hi)`."""
        new_lo = lo if self.lo is None else self.lo if lo is None else max(self.lo, lo)
        new_hi = hi if self.hi is None else self.hi if hi is None else min(self.hi, hi)
        return Interval(new_lo, new_hi)

    @property
    def empty(self) -> bool:
        """True when no integer lies inside."""
        return self.lo is not None and self.hi is not None and self.hi <= self.lo

    @property
    def bounded(self) -> bool:
        """True when either end is given."""
        return self.lo is not None or self.hi is not None

    def clip(self, start: int, end: int) -> tuple[int, int]:
        """`[start, end)` narrowed to the interval (`start >= end` when nothing is left)."""
        if self.lo is not None:
            start = max(start, self.lo)
        if self.hi is not None:
            end = min(end, self.hi)
        return start, end

    def overlaps(self, start: int, end: int) -> bool:
        """True when `[start, end)` holds an integer of the interval."""
        lo, hi = self.clip(start, end)
        return lo < hi


def _interval(op: str, value: Any) -> Interval:
    """The integers `value` passes under a comparison or `in` (a superset for `in`)."""
    if op == "in":
        values = [v for v in value if v is not None]
        return Interval(min(values), max(values) + 1) if values else Interval(0, 0)
    return {
        "=": Interval(value, value + 1),
        "<": Interval(None, value),
        "<=": Interval(None, value + 1),
        ">": Interval(value + 1, None),
        ">=": Interval(value, None),
    }.get(op, Interval())


@dataclass(frozen=True)
class Prune:
    """What a plan may leave out: topics, queues and the offset and time ranges that no row passing the
    predicates lies outside of. `nothing`: no row passes."""

    topics: frozenset[str] | None = None
    not_topics: frozenset[str] = frozenset()
    queue_ids: frozenset[int] | None = None
    queue_id: Interval = Interval()
    queue_offset: Interval = Interval()
    phy_offset: Interval = Interval()
    store_time: Interval = Interval()
    tags_codes: frozenset[int] | None = None
    nothing: bool = False

    @classmethod
    def of(cls, preds: Iterable[Predicate]) -> Prune:
        """The prune the predicates (an AND) allow; predicates it cannot use are left out of it."""
        prune = cls()
        for column, op, value in preds:
            prune = prune._with(column, op, value)
        return prune

    def _with(self, column: str, op: str, value: Any) -> Prune:
        if op == "is null" and column in _NEVER_NULL:
            return replace(self, nothing=True)
        if column == "topic":
            if op in ("=", "in"):
                wanted = frozenset([value] if op == "=" else [v for v in value if v is not None])
                return replace(self, topics=wanted if self.topics is None else self.topics & wanted)
            if op == "!=":
                return replace(self, not_topics=self.not_topics | {value})
            if op == "not in":
                if any(v is None for v in value):
                    return replace(self, nothing=True)  # x NOT IN (..., NULL) is never true
                return replace(self, not_topics=self.not_topics | frozenset(value))
            return self
        if column == "tags" and op in ("=", "in"):
            tags = [v for v in ([value] if op == "=" else value) if v is not None]
            if "" in tags:
                return self  # the code of no tags: left to the rows
            codes = frozenset(tags_code(v) for v in tags)
            return replace(self, tags_codes=codes if self.tags_codes is None else self.tags_codes & codes)
        if column == "msgId" and op == "=" and _MSG_ID.fullmatch(value):
            phy = int(value[-16:], 16)
            return replace(self, phy_offset=self.phy_offset.meet(phy, phy + 1))
        if op not in _COMPARISONS - {"!="} and op != "in":
            return self
        if column == "queueId":
            if op in ("=", "in"):
                wanted_ids = frozenset([value] if op == "=" else [v for v in value if v is not None])
                ids = wanted_ids if self.queue_ids is None else self.queue_ids & wanted_ids
                return replace(self, queue_ids=ids)
            return replace(self, queue_id=_meet(self.queue_id, op, value))
        if column == "queueOffset":
            return replace(self, queue_offset=_meet(self.queue_offset, op, value))
        if column == "commitLogOffset":
            return replace(self, phy_offset=_meet(self.phy_offset, op, value))
        if column == "storeTimestamp":
            return replace(self, store_time=_meet(self.store_time, op, value))
        return self

    @property
    def everything(self) -> bool:
        """True when the prune leaves nothing out."""
        return self == EVERYTHING

    @property
    def only_topics_and_queues(self) -> bool:
        """True when the prune leaves out topics and queues at most: no offset, time or tags bounds, and not
        every row (a prune that leaves nothing out is one)."""
        return replace(self, topics=None, not_topics=frozenset(), queue_ids=None, queue_id=Interval()) == EVERYTHING

    def keeps_topic(self, topic: str) -> bool:
        """False when no row of `topic` passes."""
        return not self.nothing and topic not in self.not_topics and (self.topics is None or topic in self.topics)

    def keeps_queue(self, topic: str, queue_id: int) -> bool:
        """False when no row of the queue passes."""
        return (self.keeps_topic(topic) and (self.queue_ids is None or queue_id in self.queue_ids)
                and self.queue_id.overlaps(queue_id, queue_id + 1))

    def time_bounds(self, start_ms: int | None, end_ms: int | None) -> tuple[int | None, int | None]:
        """Store-time bounds `[start, end)` of both the options (`start_ms`, `end_ms`) and the prune,
        within int64 (None: unbounded)."""
        both = self.store_time.meet(start_ms, end_ms)
        lo = None if both.lo is None else min(max(both.lo, _LONG_MIN), _LONG_MAX)
        hi = None if both.hi is None else min(max(both.hi, _LONG_MIN), _LONG_MAX)
        return lo, hi


def _meet(interval: Interval, op: str, value: Any) -> Interval:
    got = _interval(op, value)
    return interval.meet(got.lo, got.hi)


EVERYTHING = Prune()
"""The prune of no predicates."""


def predicates(raw: Iterable[Sequence[Any]]) -> tuple[Predicate, ...]:
    """Check `(column, op, value)` tuples and return them normalised (op lower-case, `in` values as a
    tuple).

    Raises:
        ValueError: an unknown column or operator, a column of a type filters do not take, or a value
            of the wrong type for the column.
    """
    checked: list[Predicate] = []
    for item in raw:
        if len(item) == 2:
            column, op, value = item[0], item[1], None
        elif len(item) == 3:
            column, op, value = item
        else:
            raise ValueError(f"A filter is (column, op, value), got {item!r}.")
        op = str(op).strip().lower()
        if column not in _INT_COLUMNS and column not in _STRING_COLUMNS:
            raise ValueError(f"Filter column {column!r}: not a column of integers or strings of the message row.")
        if op not in OPS:
            raise ValueError(f"Filter operator {op!r} of {column!r}: use one of {', '.join(sorted(OPS))}.")
        kind = int if column in _INT_COLUMNS else str
        if op in ("is null", "is not null"):
            if value is not None:
                raise ValueError(f"Filter {column!r} {op} takes no value, got {value!r}.")
        elif op in ("in", "not in"):
            if not isinstance(value, (list, tuple, set, frozenset)):
                raise ValueError(f"Filter {column!r} {op} takes a list of values, got {value!r}.")
            value = tuple(value)
            if not all(v is None or _is(v, kind) for v in value):
                raise ValueError(f"Filter {column!r} {op}: every value must be {kind.__name__} or None, got {value!r}.")
        elif not _is(value, kind):
            raise ValueError(f"Filter {column!r} {op}: the value must be {kind.__name__}, got {value!r}.")
        elif op != "=" and op != "!=" and kind is str:
            raise ValueError(f"Filter {column!r}: strings take =, !=, in, not in, is null and is not null.")
        checked.append((column, op, value))
    return tuple(checked)


def _is(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool) and _LONG_MIN <= value <= _LONG_MAX
    return isinstance(value, kind)


def mask(batch: pa.RecordBatch, preds: Sequence[Predicate]) -> pa.Array | None:
    """The rows of `batch` every predicate holds true for (a boolean array without nulls), or None for
    no predicates."""
    result: pa.Array | None = None
    for column, op, value in preds:
        values = batch.column(column)
        if column in _INT_COLUMNS:
            values = values.cast(pa.int64())  # a value outside int32 compares as a number, no overflow
        if op == "is null":
            test = pc.is_null(values)
        elif op == "is not null":
            test = pc.is_valid(values)
        elif op in ("in", "not in"):
            listed = [v for v in value if v is not None]
            hit = pc.is_in(values, value_set=from_values(listed, values.type))
            hit = pc.if_else(pc.is_null(values), NULL_BOOL, hit)  # NULL IN (...) is null
            if op == "in":
                test = hit
            elif len(listed) < len(value):
                test = pc.and_kleene(pc.invert(hit), NULL_BOOL)  # NOT IN (..., NULL)
            else:
                test = pc.invert(hit)
        else:
            bound = scalar(value, values.type)
            test = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
                    ">=": pc.greater_equal}[op](values, bound)
        test = pc.fill_null(test, FALSE)
        result = test if result is None else pc.and_(result, test)
    return result
