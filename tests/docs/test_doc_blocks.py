"""Every runnable block of README.md and docs/*.md runs as written: one test case per block, named
`doc:line` (`pytest tests/docs -k "docs/cli.md:88"`). The rules are in runner.py and blocks.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import REPO_ROOT
from tests.docs.blocks import Block, DocBlockError, console_steps, doc_blocks, user_docs
from tests.docs.runner import DocSession


def _cases() -> Iterator[object]:
    for doc in user_docs(REPO_ROOT):
        try:
            blocks = doc_blocks(REPO_ROOT, doc)
        except DocBlockError:
            continue  # test_every_doc_parses names it
        for block in blocks:
            if block.runs:
                marks = [pytest.mark.spark] if "spark" in block.markers else []
                yield pytest.param(block, id=block.case_id, marks=marks)


@pytest.mark.parametrize("doc", user_docs(REPO_ROOT), ids=lambda doc: doc.relative_to(REPO_ROOT).as_posix())
def test_every_doc_parses(doc) -> None:
    """Every fence is closed, every marker known, every console block holds a command."""
    for block in doc_blocks(REPO_ROOT, doc):
        if block.runs and block.lang == "console":
            console_steps(block)


@pytest.fixture(scope="session")
def doc_sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, DocSession]:
    return {}


def _session(sessions: dict[str, DocSession], doc: str, factory: pytest.TempPathFactory) -> DocSession:
    if doc not in sessions:
        sessions[doc] = DocSession(factory.mktemp("doc-" + doc.replace("/", "-").removesuffix(".md")))
    return sessions[doc]


@pytest.mark.parametrize("block", list(_cases()))
def test_doc_block_runs(block: Block, doc_sessions: dict[str, DocSession],
                        tmp_path_factory: pytest.TempPathFactory) -> None:
    session = _session(doc_sessions, block.doc, tmp_path_factory)
    # Selected alone (-k), a block has the blocks above it run first, as a reader runs them; Spark blocks
    # only for a Spark block (-m "not spark" starts no Spark: no other block may need what one made).
    earlier = [b for b in doc_blocks(REPO_ROOT, REPO_ROOT / block.doc)
               if b.runs and b.line < block.line and b.line not in session.done
               and ("spark" in block.markers or "spark" not in b.markers)]
    for before in earlier:
        outcome = session.run(before)
        if not outcome.ok:
            pytest.fail(f"an earlier block of {block.doc} failed, so {block.case_id} was not run:\n{outcome.message}",
                        pytrace=False)
    outcome = session.run(block)
    if not outcome.ok:
        pytest.fail(outcome.message, pytrace=False)
