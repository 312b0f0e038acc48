"""java-broker/validate.sh, RocketMQ's own tools end to end: 38 mqadmin and Java client steps against
`rocketstore serve`, and the same script against the real RocketMQ 4.9.8 broker to compare, run side by
side (each run is about three minutes of JVM start-ups).

mqadmin exits 0 even when a command fails, so a step is judged by what it printed: validate.sh's own
summary line (its exit code and the first line that looks like an error) and the step's output file.
A step fails when it printed an error, except the two that ask about clients after they left
(producerConnection, consumerConnection), whose error must be the one RocketMQ gives; every step must
end as it ends on the Java broker.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.broker.broker_support import BrokerProcess, create_store
from tests.broker.differential import JAVA_BROKER_DIR, JavaBroker, normalise, require_java_broker

SCRIPT = JAVA_BROKER_DIR / "validate.sh"
STEPS = 38
RUN_TIMEOUT_S = 900
# validate.sh's pattern for "a line that looks like an error" (its fourth column)
ERROR_LINE = re.compile(r"Exception|ERROR|CODE:|error|failed|No topic route")
# The steps that ask about a producer or consumer after the script's own ones exited: RocketMQ answers
# with these errors, and so must serve.
CLIENTS_GONE = {"producerConnection": "CODE: 1  DESC: the producer group[driver_producer_group] not exist",
                "consumerConnection": "CODE: 206  DESC: the consumer group[ValGroup] not online"}
# Not errors: a message's track says its group is offline; the producer's summary counts failures (0).
NOT_ERRORS = re.compile(r"MessageTrack \[|\"failed\":0")
# A request the Java tools could not send or got no answer to in time.
TRANSPORT = re.compile(r"Remoting(SendRequest|Timeout|Connect)Exception")
# What some steps must print (a pattern of their output).
PRINTED = {name: re.compile(pattern, re.MULTILINE) for name, pattern in {
    "producer": r'"sent":100,"failed":0', "consumer": r'"received":100,', "consumerAfterReset": r'"received":100,',
    "queryMsgByKey": r"^[0-9A-F]{32}\s+\d+\s+\d+$", "queryMsgById": r"^Keys:\s+\[vk-7\]$",
    "queryMsgByUniqueKey": r"^Keys:\s+\[vk-7\]$", "sendMessage": r"\bSEND_OK\b",
    "deleteTopic": r"delete topic \[ValDelTopic\] from NameServer success"}.items()}


@dataclass(frozen=True)
class Step:
    """One line of validate.sh's summary, with the step's whole output."""

    name: str
    rc: int
    seconds: float
    first_error: str
    output: str


@dataclass(frozen=True)
class Run:
    steps: dict[str, Step]
    seconds: float


_SUMMARY = re.compile(r"^(\S+)\s+rc=(\d+)\s+([\d.]+)s\s*(.*)$")


def _parse(stdout: str, out_dir: Path, seconds: float) -> Run:
    steps: dict[str, Step] = {}
    for line in stdout.splitlines():
        match = _SUMMARY.match(line)
        if match is None:
            continue
        name = match[1]
        (path,) = out_dir.glob(f"[0-9][0-9]-{name}.txt")
        steps[name] = Step(name, int(match[2]), float(match[3]), match[4].strip(),
                           path.read_text(errors="replace"))
    return Run(steps, seconds)


def _start(namesrv: str, broker: str, out_dir: Path) -> tuple[subprocess.Popen[str], float]:
    return subprocess.Popen([str(SCRIPT), namesrv, broker, str(out_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True), time.monotonic()


def _finish(started: tuple[subprocess.Popen[str], float], out_dir: Path) -> Run:
    proc, t0 = started
    stdout, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    return _parse(stdout, out_dir, time.monotonic() - t0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, Run]]:
    """validate.sh against serve and against the Java broker, at the same time."""
    require_java_broker()
    root = tmp_path_factory.mktemp("validate")
    java = JavaBroker(root / "java").start()
    ours = BrokerProcess(create_store(root / "store"), root / "serve.log").start()
    try:
        mine = _start(ours.namesrv, ours.addr, root / "ours")
        theirs = _start(java.namesrv, java.addr, root / "java-out")
        yield _finish(mine, root / "ours"), _finish(theirs, root / "java-out")
    finally:
        ours.stop()
        java.stop()


def errors(step: Step) -> list[str]:
    """The lines of a step's output that say something failed (stack frames left out)."""
    return [line.strip() for line in step.output.splitlines()
            if ERROR_LINE.search(line) and not NOT_ERRORS.search(line) and not line.lstrip().startswith("at ")]


def failures(run: Run) -> dict[str, list[str]]:
    """Step -> why it failed, for every failing step of a run."""
    failed: dict[str, list[str]] = {}
    for name, step in run.steps.items():
        found = errors(step)
        if name in CLIENTS_GONE:
            if not any(CLIENTS_GONE[name] in line for line in found):
                failed[name] = [f"expected {CLIENTS_GONE[name]!r}", *found]
        elif step.rc != 0 or found:
            failed[name] = [f"rc={step.rc}", *found]
        if name in PRINTED and not PRINTED[name].search(step.output):
            failed.setdefault(name, []).append(f"{PRINTED[name].pattern!r} not printed")
    return failed


def test_every_step_of_validate_sh_passes_on_serve(runs: tuple[Run, Run]) -> None:
    ours, _ = runs
    assert len(ours.steps) == STEPS, sorted(ours.steps)
    assert failures(ours) == {}


def test_every_step_ends_on_serve_as_on_the_java_broker(runs: tuple[Run, Run]) -> None:
    """A step the Java run lost to its own transport (a request mqadmin could not send or got no answer
    to in time, on a loaded machine) is left out of the comparison; any other failure of the reference
    run fails the test."""
    ours, java = runs
    assert list(ours.steps) == list(java.steps)
    lost = {name for name, why in failures(java).items() if any(TRANSPORT.search(line) for line in why)}
    assert {name: why for name, why in failures(java).items() if name not in lost} == {}, \
        "the reference run itself failed"
    assert len(lost) <= 2, f"the Java run lost {sorted(lost)} to its transport"
    for name, step in ours.steps.items():
        if name in lost:
            continue
        if name != "producer":  # its summary line carries the run's rate and latencies
            assert normalise(step.first_error) == normalise(java.steps[name].first_error), name
        assert step.rc == java.steps[name].rc, name
