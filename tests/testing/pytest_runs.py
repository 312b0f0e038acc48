"""Runs pytest the way a user of rocketstore does: in another venv, in a project of its own, the
`rocketmq_broker` fixture found through rocketstore's `pytest11` entry point."""

from __future__ import annotations

import os
import subprocess
import sysconfig
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import rocketstore

RUN_TIMEOUT_S = 300


@dataclass
class PytestRun:
    returncode: int
    output: str
    outcomes: dict[str, str]  # test name -> passed / failed / error / skipped
    tmp: Path  # the run's TMPDIR: where its brokers made their stores

    def describe(self) -> str:
        return f"pytest exited with {self.returncode}:\n{self.output[-6000:]}"


def installed_paths() -> list[str]:
    """Where rocketstore and its dependencies are installed for this interpreter (with rocketstore's
    dist-info, whose entry points pytest reads), as a user's install would put them on the path."""
    source_root = str(Path(rocketstore.__file__).resolve().parents[1])
    paths = [source_root, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return list(dict.fromkeys(paths))


def run_pytest(python: Path | str, project: Path, *args: str) -> PytestRun:
    """`python -m pytest ARGS` in `project` with rocketstore on the path, HOME and TMPDIR inside the
    project, and no cache; the outcome of each test from its JUnit report."""
    home, tmp = project / ".home", project / ".tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PYTEST"))}
    env.update(PYTHONPATH=os.pathsep.join(installed_paths()), HOME=str(home), TMPDIR=str(tmp))
    report = project / ".report.xml"
    try:
        done = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}",
                               "-q", *args], cwd=project, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"pytest did not finish within {RUN_TIMEOUT_S} s:\n{exc.output}") from exc
    outcomes: dict[str, str] = {}
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
            outcomes[case.get("name", "?")] = kinds[0] if kinds else "passed"
    return PytestRun(done.returncode, done.stdout, outcomes, tmp)


def processes_mentioning(text: str) -> list[str]:
    """Command lines of the running processes whose command line contains `text` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found

