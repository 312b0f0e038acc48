"""The pytest plugin, run as a user runs it (a project of its own, the plugin found through the entry
point): one broker for the session with the topics of the ini option and of the markers; bad or
conflicting specs are usage errors before any test runs."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.testing.pytest_runs import processes_mentioning, run_pytest

pytestmark = pytest.mark.broker


def _project(root: Path, ini: str, **modules: str) -> Path:
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n" + textwrap.dedent(ini))
    for name, text in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(text))
    return root


def test_one_broker_for_the_session_with_the_topics_of_ini_and_markers(tmp_path):
    project = _project(tmp_path / "project", """\
        rocketmq_topics = payments:2 audit
        rocketmq_broker_args = --max-reconsume-times 3
        """, test_orders="""\
        import pytest
        from pathlib import Path

        pytestmark = pytest.mark.rocketmq_topics("orders:4:FIFO")

        def test_topics(rocketmq_broker):
            assert sorted(map(str, rocketmq_broker.topics)) == ["audit:4", "jobs:1", "orders:4:FIFO", "payments:2"]
            Path("first-pid").write_text(str(rocketmq_broker.pid))

        def test_serve_options(rocketmq_broker):
            cmdline = Path(f"/proc/{rocketmq_broker.pid}/cmdline").read_bytes().split(b"\\0")
            assert cmdline[cmdline.index(b"--max-reconsume-times") + 1] == b"3"
            assert rocketmq_broker.namesrv_addr.startswith("127.0.0.1:")
            assert rocketmq_broker.grpc_endpoint.startswith("127.0.0.1:")
        """, test_jobs="""\
        import pytest
        from pathlib import Path

        @pytest.mark.rocketmq_topics("jobs:1", "orders:4:FIFO")
        def test_same_broker(rocketmq_broker):
            assert Path("first-pid").read_text() == str(rocketmq_broker.pid)
        """)
    run = run_pytest(sys.executable, project, "test_orders.py", "test_jobs.py")
    assert run.returncode == 0, run.describe()
    assert run.outcomes == {"test_topics": "passed", "test_serve_options": "passed", "test_same_broker": "passed"}
    assert processes_mentioning(str(project)) == []
    assert list(run.tmp.iterdir()) == []


def test_two_specs_of_one_topic_are_a_usage_error(tmp_path):
    project = _project(tmp_path / "project", "rocketmq_topics = orders:4\n", test_a="""\
        import pytest

        @pytest.mark.rocketmq_topics("orders:8:FIFO")
        def test_a(rocketmq_broker):
            pass
        """)
    run = run_pytest(sys.executable, project, "test_a.py")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.describe()
    assert ("topic 'orders' is declared as orders:4 by the rocketmq_topics ini option and as orders:8:FIFO by "
            "the rocketmq_topics marker of test_a.py::test_a") in run.output
    assert run.outcomes == {}


def test_a_bad_spec_is_a_usage_error_naming_it(tmp_path):
    project = _project(tmp_path / "project", "rocketmq_topics = orders:4:LIFO\n", test_a="""\
        def test_a(rocketmq_broker):
            pass
        """)
    run = run_pytest(sys.executable, project, "test_a.py")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.describe()
    assert "the rocketmq_topics ini option: topic spec 'orders:4:LIFO': type 'LIFO' is not one of" in run.output
    assert list(run.tmp.iterdir()) == []
