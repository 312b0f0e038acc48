"""The compiled `record_columns` lets go of the GIL while it walks the records: another Python thread
runs during one long call (what lets option `readAhead` decode a batch while the consumer handles the one
before it).

A second thread notes the time every millisecond (`time.sleep` lets go of the GIL, noting the time needs
it). A call that held the GIL throughout would leave no note in its middle: a note can only be taken
before the call is entered or after it returned, so the middle half of a call of at least 200 ms would be
empty.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rocketstore.format.message import encode_message
from rocketstore.native import speedups

pytestmark = pytest.mark.skipif(speedups is None, reason="the compiled module is not built (or "
                                                         "ROCKETSTORE_PURE_PYTHON is set)")

MIN_CALL_SECONDS = 0.2


def _record() -> bytes:
    return encode_message(topic=b"TopicA", body=b"0123456789abcdef", properties=b"TAGS\x01TagA\x02KEYS\x01k1 k2",
                          queue_id=1, flag=0, queue_offset=2, phy_offset=300, sys_flag=0, born_timestamp=4,
                          born_ip=b"\1\2\3\4", born_port=5, store_timestamp=6, store_ip=b"\7\7\7\7", store_port=8)


def _long_call_args() -> tuple[bytes, np.ndarray, np.ndarray]:
    """One record and as many ranges over it as make a call of at least MIN_CALL_SECONDS."""
    assert speedups is not None
    raw = _record()
    rows = 100_000
    while True:
        starts = np.zeros(rows, dtype=np.int64)
        ends = np.full(rows, len(raw), dtype=np.int64)
        began = time.perf_counter()
        columns = speedups.record_columns(raw, starts, ends)
        seconds = time.perf_counter() - began
        assert columns is not None, "record_columns declined a record it covers"
        if seconds >= MIN_CALL_SECONDS or rows >= 32_000_000:
            return raw, starts, ends
        rows *= 2


def test_another_thread_runs_during_one_long_record_columns_call():
    assert speedups is not None
    raw, starts, ends = _long_call_args()
    notes: list[float] = []
    stop = threading.Event()

    def note() -> None:
        while not stop.is_set():
            notes.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=note, daemon=True)
    thread.start()
    try:
        time.sleep(0.05)  # the thread is noting
        began = time.perf_counter()
        columns = speedups.record_columns(raw, starts, ends)
        ended = time.perf_counter()
    finally:
        stop.set()
        thread.join()
    assert columns is not None
    quarter = (ended - began) / 4
    assert ended - began >= MIN_CALL_SECONDS * 0.5, "the call was too short to tell"
    middle = [t for t in notes if began + quarter <= t <= ended - quarter]
    assert len(middle) >= 3, (f"{len(middle)} notes of the other thread in the middle half of a "
                              f"{ended - began:.3f} s call: record_columns held the GIL")
