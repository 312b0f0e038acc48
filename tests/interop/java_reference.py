"""Running the real RocketMQ 4.9.8 store (`rocketmq-java`, the project's optional java-reference) from tests.

The reference is looked for at `$ROCKETSTORE_JAVA_REFERENCE`, else beside the repository in
`../shared/java-reference`; tests that need it skip with a one-line reason when it (or `java`) is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.conftest import GOLDEN_GEOMETRY, REPO_ROOT

REFERENCE_DIR = Path(os.environ.get("ROCKETSTORE_JAVA_REFERENCE", REPO_ROOT.parent / "shared" / "java-reference"))
SCRIPT = REFERENCE_DIR / "rocketmq-java"

# The geometry the harness uses for read and write (its defaults; passed explicitly so both sides agree).
JAVA_GEOMETRY_OPTS = [
    f"-DcommitlogFileSize={GOLDEN_GEOMETRY['commitlog_file_size']}",
    f"-DconsumeQueueFileEntries={GOLDEN_GEOMETRY['consume_queue_file_entries']}",
    f"-DindexHashSlots={GOLDEN_GEOMETRY['index_hash_slots']}",
    f"-DindexMaxEntries={GOLDEN_GEOMETRY['index_max_entries']}",
]


def missing_reason() -> str | None:
    """Why the reference cannot run here, or None when it can."""
    if not SCRIPT.is_file():
        return f"RocketMQ java-reference not found at {REFERENCE_DIR} (set ROCKETSTORE_JAVA_REFERENCE)"
    if shutil.which("java") is None:
        return "java is not on PATH (the RocketMQ java-reference needs Java 17)"
    return None


def run(mode: str, *args: str | Path, opts: Sequence[str] = (), timeout: float = 180) -> str:
    """Run `rocketmq-java MODE ARGS` with the small golden geometry; returns its stderr (its log line)."""
    with tempfile.TemporaryDirectory(prefix="rocketmq-java-") as logs:
        log = Path(logs) / "java.log"  # the reference's log goes here, not to a file of its own in /tmp
        env = dict(os.environ, JAVA_OPTS=" ".join(["-Xmx512m", *JAVA_GEOMETRY_OPTS, *opts]), RMQ_LOG=str(log))
        proc = subprocess.run([str(SCRIPT), mode, *map(str, args)], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
        if proc.returncode != 0:
            tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
            raise AssertionError(f"rocketmq-java {mode} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}\n"
                                 f"its log:\n{tail}")
    return proc.stderr


def read(store: Path, out_dir: Path, probes: Sequence[str] = (),
         opts: Sequence[str] = ()) -> dict[str, Any]:
    """Everything the Java store answers about `store` (normal or abnormal recovery first), as JSON."""
    probe_file = out_dir / "probes.tsv"
    probe_file.write_text("".join(line + "\n" for line in probes), encoding="utf-8")
    out = out_dir / "java-read.json"
    run("read", store, probe_file, out, opts=["-Drole=SLAVE", *opts])
    return json.loads(out.read_text(encoding="utf-8"))


def write(store: Path, n: int, prefix: str, out_dir: Path, opts: Sequence[str] = ()) -> dict[str, Any]:
    """Append `n` messages with the Java store's putMessage (as a master: due delayed records are delivered
    too); every put result, as JSON."""
    out = out_dir / "java-write.json"
    run("write", store, n, prefix, out, opts=opts)
    return json.loads(out.read_text(encoding="utf-8"))
