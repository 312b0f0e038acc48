"""Reads that ask for some columns against reads of every column, same run, alternating rounds.

Cases, each in this process on one store (built by the script unless `--store` names one):

* `arrow full`: `rocketstore.arrow.read(store)`, every column;
* `arrow topic`: `rocketstore.arrow.read(store, columns=["topic"])`;
* `arrow body`: `columns=["body"]`;
* `sql count by topic`: `rocketstore.sql.query(store, "SELECT topic, count(*) ... GROUP BY topic")`, whose
  scan reads only `topic`;
* `sql count by topic, all columns`: the same query with the scan reading every column and selecting
  afterwards (what it did before the projection reached the read);
* `rocketstore sql (process)`: the `rocketstore sql` command on the query, start-up included.

Each round runs every case once, in a rotated order; the median of the rounds is reported with the ratio
of each case to `arrow full` and of the projected query to the all-columns one.

    python benchmarks/bench_projection.py --size-mib 1500 --body 256 --repeat 5
    python benchmarks/bench_projection.py --store /data/store --repeat 5 --save
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

import rocketstore.arrow
import rocketstore.sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_spark_read import (
    COUNT_BY_TOPIC,
    base_parser,
    report,
    save,
    store_extent,
    subprocess_seconds,
    with_store,
)


@contextmanager
def every_column() -> Iterator[None]:
    """`rocketstore.arrow.read` reading every column whatever it is asked (selected afterwards)."""
    real = rocketstore.arrow.read

    def read(path: Any, options: Any = None, filters: Any = (), columns: Any = None) -> pa.RecordBatchReader:
        whole = real(path, options, filters)
        if columns is None:
            return whole
        schema = pa.schema([whole.schema.field(c) for c in columns])
        return pa.RecordBatchReader.from_batches(schema, (b.select(list(columns)) for b in whole))

    rocketstore.arrow.read = read
    try:
        yield
    finally:
        rocketstore.arrow.read = real


def cases(root: Path) -> dict[str, Callable[[], Any]]:
    store = str(root)

    def rows(columns: list[str] | None) -> Callable[[], int]:
        return lambda: sum(b.num_rows for b in rocketstore.arrow.read(store, columns=columns))

    def sql_all_columns() -> Any:
        with every_column():
            return rocketstore.sql.query(store, COUNT_BY_TOPIC)

    cli = [sys.executable, "-m", "rocketstore.cli", "sql", store, COUNT_BY_TOPIC]
    return {
        "arrow full": rows(None),
        "arrow topic": rows(["topic"]),
        "arrow body": rows(["body"]),
        "sql count by topic": lambda: rocketstore.sql.query(store, COUNT_BY_TOPIC),
        "sql count by topic, all": sql_all_columns,
        "rocketstore sql (process)": lambda: subprocess_seconds(cli, "BenchA"),
    }


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--label", default="", help="a line naming the code measured, first in the report")
    args = p.parse_args()

    def run(root: Path, notes: list[str]) -> None:
        nbytes, messages = store_extent(root)
        work = cases(root)
        answers = {name: work[name]() for name in ("sql count by topic", "sql count by topic, all")}  # warm-up
        if answers["sql count by topic"] != answers["sql count by topic, all"]:
            raise RuntimeError(f"the two queries disagree: {answers}")
        names = list(work)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        for r in range(args.repeat):
            for name in names[r % len(names):] + names[:r % len(names)]:
                began = time.perf_counter()
                work[name]()
                seconds[name].append(time.perf_counter() - began)
        median = {name: statistics.median(s) for name, s in seconds.items()}
        ratios = [f"{name}: {median[name] / median['arrow full']:.2f}x the time of arrow full"
                  for name in names if name != "arrow full"]
        ratios.append(f"sql count by topic: {median['sql count by topic, all'] / median['sql count by topic']:.2f}x "
                      "faster than with every column read")
        text = report(f"{args.label}\nbench_projection.py, {args.repeat} alternating rounds, medians".strip(),
                      [(name, seconds[name]) for name in names], nbytes, messages,
                      [*notes, "rounds (s): " + "; ".join(f"{n} " + " ".join(f"{x:.2f}" for x in s)
                                                          for n, s in seconds.items())])
        text += "\n" + "\n".join(ratios)
        print(text)
        if args.save:
            save("bench_projection", text)

    with_store(args, run)


if __name__ == "__main__":
    main()
