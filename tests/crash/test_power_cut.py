"""A simulated power cut: every page written since its last msync may or may not have reached the disk.

The fs.msync seam records, page by page, what each mapping held when it was last forced to disk. At
the cut, each dirty page of every mapped file (commitlog, consume queues, index, checkpoint) is
independently either the current page or the last synced one (zeros if it never was): the worst the
page cache can leave. The image is written to a copy of the store, which is then opened.

SYNC mode must keep every acknowledged message; ASYNC mode keeps every message up to the last flush,
and what it keeps is a whole prefix of the log (nothing in the middle goes missing).
"""

from __future__ import annotations

import mmap
import random
import shutil
from pathlib import Path

import pytest

from rocketstore import FlushMode, MessageStore, PutStatus, RecoveryMode
from rocketstore.storage import fs

from .workload import Ack, check_store, crash_config, message_for, seq_of

pytestmark = pytest.mark.crash

PAGE = fs.PAGE_SIZE
CUTS = 25


class PageCache:
    """What each mapping held at its last msync, page by page."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.synced: dict[int, dict[int, bytes]] = {}
        self._alive: list[mmap.mmap] = []  # keeps every recorded mapping alive: ids are never reused
        real = fs.msync

        def recording(mm: mmap.mmap, start: int, end: int) -> None:
            # the pages as they are before the sync: a writer may go on while it runs (it lets the
            # interpreter lock go), and what it writes meanwhile is not known to be on disk
            before = {page: mm[page * PAGE:(page + 1) * PAGE] for page in range(start // PAGE, -(-end // PAGE))}
            real(mm, start, end)
            if id(mm) not in self.synced:
                self._alive.append(mm)
            self.synced.setdefault(id(mm), {}).update(before)

        monkeypatch.setattr(fs, "msync", recording)

    def disk_image(self, mm: mmap.mmap, rng: random.Random) -> bytes:
        """What a power cut may leave of this mapping."""
        synced = self.synced.get(id(mm), {})
        out = bytearray(len(mm))
        for page in range(-(-len(mm) // PAGE)):
            current = mm[page * PAGE:(page + 1) * PAGE]
            old = synced.get(page, bytes(len(current)))
            out[page * PAGE:page * PAGE + len(current)] = current if current == old or rng.random() < 0.5 else old
        return bytes(out)


def _mapped_files(store: MessageStore) -> list[tuple[Path, mmap.mmap]]:
    found = [(mf.path, mf.mm) for mf in store.commitlog.queue.files]
    for cq in store._queues.all():
        found += [(mf.path, mf.mm) for mf in cq.queue.files]
    found += [(f.path, f.mm) for f in store.index.files]
    assert store.checkpoint is not None and store.checkpoint.mm is not None
    found.append((store.checkpoint.path, store.checkpoint.mm))
    return found


def _cut_power(store: MessageStore, cache: PageCache, dest: Path, rng: random.Random) -> Path:
    shutil.copytree(store.path, dest, ignore=shutil.ignore_patterns("lock"))
    for path, mm in _mapped_files(store):
        (dest / path.relative_to(store.path)).write_bytes(cache.disk_image(mm, rng))
    return dest


@pytest.mark.parametrize("mode", [FlushMode.SYNC, FlushMode.ASYNC])
def test_a_power_cut_keeps_what_each_flush_mode_promises(tmp_path, monkeypatch, mode):
    cache = PageCache(monkeypatch)
    rng = random.Random(11)
    cfg = crash_config(mode, flush_interval_ms=3_600_000, flush_thorough_interval_ms=3_600_000,
                       flush_consume_queue_interval_ms=3_600_000)
    acked: dict[int, Ack] = {}
    durable: dict[int, Ack] = {}
    order: list[int] = []
    seq = 0
    with MessageStore.open(tmp_path / "live", cfg) as store:
        for cut in range(CUTS):
            for _ in range(rng.randint(5, 40)):
                r = store.put(message_for(seq))
                assert r.status is PutStatus.PUT_OK
                acked[seq] = Ack(seq, r.phy_offset, r.queue_offset, r.size)
                order.append(seq)
                seq += 1
                if rng.random() < 0.1:
                    store.flush()
                    durable = dict(acked)
            copy = _cut_power(store, cache, tmp_path / f"cut-{cut}", rng)
            (copy / "abort").touch()
            with MessageStore.open(copy, cfg) as recovered:
                assert recovered.recovery.mode is RecoveryMode.ABNORMAL
                promised = acked if mode is FlushMode.SYNC else durable
                messages = check_store(recovered, promised)
                kept = [seq_of(m) for m in messages]
                assert kept == order[:len(kept)], "the recovered log is a prefix of what was written"
