"""Hand-written C against mypyc on the put's first step: `Preparer.prepare` of the common message.

Copies `src/` into a temporary folder, compiles `rocketstore/store/prepare.py` there with mypyc (from
the `mypy` package of the dev dependencies), then times in fresh processes, alternating, for `--rounds`
rounds: the plain Python `prepare_py`, the same function compiled by mypyc, and the compiled
`_speedups.prepare_plain` behind `prepare`. 200,000 messages of 100 B with a tag and one key; best of
three passes per process; medians (ranges) in ns per message.

    .venv/bin/python benchmarks/bench_mypyc.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TIMING = r'''
import json, sys, time
from rocketstore import Message, StoreConfig
from rocketstore.store import prepare as module
mode = sys.argv[1]
config = StoreConfig()
preparer = module.Preparer(config, b"\x7f\x00\x00\x01", config.delay_level_millis())
messages = [Message("AbTopic", b"x" * 100, queue_id=i % 4, tags="TagA", keys=(f"key-{i}",))
            for i in range(200_000)]
run = preparer.prepare if mode == "c" else preparer.prepare_py
best = float("inf")
for _ in range(3):
    started = time.perf_counter()
    for m in messages:
        run(m)
    best = min(best, time.perf_counter() - started)
print(json.dumps({"compiled_by_mypyc": module.__file__.endswith(".so"), "ns": best / len(messages) * 1e9}))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mypyc = shutil.which("mypyc", path=str(Path(sys.executable).parent))
    if mypyc is None:
        print("mypyc is not installed beside this Python (pip install mypy): nothing measured")
        return
    with tempfile.TemporaryDirectory(prefix="bench-mypyc-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
        built = subprocess.run([mypyc, "rocketstore/store/prepare.py"], cwd=src, capture_output=True, text=True)
        if built.returncode != 0:
            sys.exit(f"mypyc failed:\n{built.stdout}\n{built.stderr}")
        variants = {"Python prepare_py": (ROOT / "src", "py"), "mypyc prepare_py": (src, "py"),
                    "C prepare_plain": (ROOT / "src", "c")}
        times: dict[str, list[float]] = {name: [] for name in variants}
        for i in range(args.rounds):
            order = list(variants) if i % 2 == 0 else list(reversed(variants))
            for name in order:
                path, mode = variants[name]
                done = subprocess.run([sys.executable, "-c", TIMING, mode], env={"PYTHONPATH": str(path)},
                                      capture_output=True, text=True, check=True)
                result = json.loads(done.stdout)
                assert result["compiled_by_mypyc"] == (name.startswith("mypyc")), result
                times[name].append(result["ns"])
    base = statistics.median(times["Python prepare_py"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:18} {median:8.0f} ns/message ({min(values):.0f}-{max(values):.0f})  "
              f"{base / median:5.2f}x the plain Python")


if __name__ == "__main__":
    main()
