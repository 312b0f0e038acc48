"""Recovery by invariant: whatever one file suffered, after any open every record of the log's valid
range is reachable through its queue at its offset and through each of its keys, or the recovery report
names what was set aside; the next put to every queue gets that queue's true next offset; `verify`
finds nothing the report did not name; no bare Python error.

The cases come from a seeded generator (tests/adversarial/damage.py): file kind (commitlog, consume
queue, index, checkpoint, abort, each JSON state file) x damage (delete, truncate, zero-fill, flipped
bytes, wrong size, entries pointing past the end, at another record or another topic, index chains that
loop, rewritten topic bytes) x how the store was left (closed, killed, copied while written), on a
geometry where every file kind rolls over. `ROCKETSTORE_DAMAGE_CASES` sets how many (default 240),
`ROCKETSTORE_DAMAGE_SEED` the first seed.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from tests.adversarial.damage import check_case, damage, make_case, write_store

CASES = int(os.environ.get("ROCKETSTORE_DAMAGE_CASES", "240"))
FIRST_SEED = int(os.environ.get("ROCKETSTORE_DAMAGE_SEED", "29000"))
PER_CASE_SECONDS = 120  # a guard against a recovery that loops, not a speed check (the machine may be loaded)


@pytest.mark.parametrize("block", range(8))
def test_damage_keeps_the_invariant(tmp_path: Path, block: int) -> None:
    per_block = -(-CASES // 8)
    for seed in range(FIRST_SEED + block * per_block, min(FIRST_SEED + (block + 1) * per_block, FIRST_SEED + CASES)):
        case = make_case(seed)
        rng = random.Random(seed)
        root = tmp_path / f"case{seed}"
        started = time.monotonic()
        acked = write_store(root, tmp_path / f"scratch{seed}", case, rng)
        damage(root, case, rng, acked)
        check_case(root, case, acked)
        assert time.monotonic() - started < PER_CASE_SECONDS, f"{case}: took {time.monotonic() - started:.1f} s"
