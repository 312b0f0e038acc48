"""kill -9 of a real writer process at random moments, then reopen and check every invariant.

The default run does ROCKETSTORE_KILL9_TRIALS (100) SYNC trials and a quarter as many ASYNC trials,
in lineages of 20 trials on the same store (each trial crashes a store that was already recovered
from earlier crashes). A longer run: ROCKETSTORE_KILL9_TRIALS=2000 pytest -m crash tests/crash/test_kill9.py
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketstore import FlushMode, MessageStore, RecoveryMode

from .workload import Ack, check_store, crash_config, message_for, parse_acks, seq_of

pytestmark = pytest.mark.crash

WRITER = Path(__file__).with_name("writer.py")
TRIALS = int(os.environ.get("ROCKETSTORE_KILL9_TRIALS", "100"))
LINEAGE = 20
SEED = int(os.environ.get("ROCKETSTORE_KILL9_SEED", "20261122"))


def _start_writer(root: Path, mode: FlushMode, first_seq: int, how: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(WRITER), str(root), mode.value, str(first_seq), "1000000", how],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _kill_at_random(proc: subprocess.Popen[bytes], rng: random.Random) -> tuple[str, bool]:
    """Let the writer run a random while, SIGKILL it; return its output and whether it was ready."""
    assert proc.stdout is not None
    seen: list[bytes] = []
    ready = False
    if rng.random() < 0.1:
        time.sleep(rng.uniform(0.0, 0.25))  # sometimes while it opens (and recovers) the store
    else:
        first = proc.stdout.readline()
        seen.append(first)
        ready = first == b"READY\n"
        assert ready, proc.stderr.read().decode() if proc.stderr else first
        for _ in range(rng.randint(0, 40)):
            seen.append(proc.stdout.readline())
        time.sleep(rng.uniform(0.0, 0.004))  # land inside a put or a flush
    proc.send_signal(signal.SIGKILL)
    rest, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err.decode()
    out = b"".join(seen) + rest
    return out.decode(), ready or out.startswith(b"READY\n")


def _trial(root: Path, mode: FlushMode, rng: random.Random, acked: dict[int, Ack], next_seq: int,
           how: str) -> int:
    proc = _start_writer(root, mode, next_seq, how)
    output, ready = _kill_at_random(proc, rng)
    acked.update((a.seq, a) for a in parse_acks(output))
    with MessageStore.open(root, crash_config(mode)) as store:
        if ready:
            assert store.recovery.mode is RecoveryMode.ABNORMAL
        assert store.recovery.end_offset == store.max_phy_offset
        messages = check_store(store, acked)
        next_seq = max([next_seq - 1, *acked, *(seq_of(m) for m in messages)]) + 1
        result = store.put(message_for(next_seq))  # the recovered store takes new puts at its end
        assert result.ok and result.phy_offset >= store.recovery.end_offset
        assert result.queue_offset == store.max_offset(result.topic, result.queue_id) - 1
        acked[next_seq] = Ack(next_seq, result.phy_offset, result.queue_offset, result.size)
    return next_seq + 1


def _run(tmp_path: Path, mode: FlushMode, trials: int, how: str = "put") -> None:
    rng = random.Random(SEED + (mode is FlushMode.ASYNC))
    done = 0
    lineage = 0
    while done < trials:
        root = tmp_path / f"{mode.name.lower()}-{lineage}"
        acked: dict[int, Ack] = {}
        next_seq = 0
        for _ in range(min(LINEAGE, trials - done)):
            next_seq = _trial(root, mode, rng, acked, next_seq, how)
            done += 1
        assert acked, "no put was ever acknowledged: the trials did not exercise anything"
        lineage += 1


def test_sync_flush_never_loses_an_acknowledged_message(tmp_path):
    _run(tmp_path, FlushMode.SYNC, TRIALS)


def test_sync_flush_never_loses_a_message_acknowledged_through_put_nowait(tmp_path):
    # puts queued and written in batches, each acknowledged once its PendingPut says PUT_OK
    _run(tmp_path, FlushMode.SYNC, max(LINEAGE, TRIALS // 4), how="nowait")


def test_async_flush_loses_nothing_a_process_crash_leaves_in_the_page_cache(tmp_path):
    # kill -9 (unlike a power cut) keeps every byte written to the mapping, so even ASYNC puts survive;
    # what ASYNC may lose on a power cut is checked in test_power_cut.py.
    _run(tmp_path, FlushMode.ASYNC, max(LINEAGE, TRIALS // 4))
