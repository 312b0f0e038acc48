"""The example project (example_project/, what a user copies) passes in each client's own venv, with the
`rocketmq_broker` fixture found through rocketstore's pytest11 entry point, and leaves nothing behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.testing.pytest_runs import processes_mentioning, run_pytest

EXAMPLE = Path(__file__).parent / "example_project"

pytestmark = pytest.mark.broker


def _run_example(python: Path, module: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    run = run_pytest(python, project, module)
    assert run.returncode == 0, run.describe()
    assert run.outcomes and set(run.outcomes.values()) == {"passed"}, (run.outcomes, run.describe())
    assert processes_mentioning(str(project)) == []
    assert list(run.tmp.iterdir()) == [], "the broker's store was left behind"


def test_rocketmq5_client_sends_and_receives_on_a_fifo_topic(client5_python, tmp_path):
    _run_example(client5_python, "test_orders_rocketmq5.py", tmp_path)


def test_legacy_client_sends_and_pulls(legacy_client_python, tmp_path):
    _run_example(legacy_client_python, "test_payments_legacy.py", tmp_path)
