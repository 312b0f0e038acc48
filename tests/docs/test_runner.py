"""The docs runner itself: how it reads blocks and markers, splits console transcripts, matches output, and
runs blocks in one directory with the shell state carried from block to block."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.blocks import DocBlockError, console_steps, extract_blocks, output_matches
from tests.docs.runner import DocSession, clean_terminal_output

DOC = """# Title

```python
print("runs")
```

<!-- illustrative -->
```bash
rocketstore serve /data/store
```

<!-- spark -->
```console
$ echo one
one
```

- a list item:

  ```console
  $ printf 'a\\nb\\n'
  a
  b
  ```

```json
{"not": "run"}
```
"""


def test_blocks_markers_and_languages() -> None:
    blocks = extract_blocks(DOC, "docs/x.md")
    assert [(b.line, b.lang, sorted(b.markers), b.runs) for b in blocks] == [
        (3, "python", [], True),
        (8, "bash", ["illustrative"], False),
        (13, "console", ["spark"], True),
        (20, "console", [], True),
        (26, "json", [], False),
    ]
    assert blocks[0].case_id == "docs/x.md:3"
    assert blocks[3].text == "$ printf 'a\\nb\\n'\na\nb\n", "the fence's indentation is removed"


@pytest.mark.parametrize("text, message", [
    ("<!-- ilustrative -->\n```bash\nls\n```\n", "unknown block marker(s) ['ilustrative']"),
    ("```bash\nls\n", "never closed"),
])
def test_bad_blocks_are_refused(text: str, message: str) -> None:
    with pytest.raises(DocBlockError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        extract_blocks(text, "d.md")


def test_an_ordinary_comment_before_a_fence_is_no_marker() -> None:
    with pytest.raises(DocBlockError):
        extract_blocks("<!-- see below -->\n```bash\nls\n```\n", "d.md")
    [block] = extract_blocks("<!-- -->\n```bash\nls\n```\n", "d.md")
    assert block.markers == frozenset()


def test_console_steps_commands_continuations_and_output() -> None:
    [block] = extract_blocks("```console\n$ a \\\n  --flag\nout 1\n$ b\n$ c\nx\n```\n", "d.md")
    steps = console_steps(block)
    assert [(s.command, s.expected) for s in steps] == [("a \\\n  --flag", ("out 1",)), ("b", ()), ("c", ("x",))]
    [output_only] = extract_blocks("```console\nrebuild: 14 s\n```\n", "d.md")
    with pytest.raises(DocBlockError, match="output before the first"):
        console_steps(output_only)


@pytest.mark.parametrize("expected, actual, matches", [
    (["a", "b"], ["a", "b  ", ""], True),
    (["a", "b"], ["a", "c"], False),
    (["a"], ["a", "b"], False),
    ([], [], True),
    ([], ["anything"], False),
    (["a", "...", "z"], ["a", "z"], True),
    (["a", "...", "z"], ["a", "1", "2", "z"], True),
    (["a", "...", "z"], ["a", "1", "2"], False),
    (["...", "end"], ["x", "end", "y", "end"], True),
    (["in ... s:"], ["in 7.9 s:"], True),
    (["in ... s:"], ["in 7.9 ms"], False),
    (["key-1,B…"], ["key-1,BB"], False),
    (["a.b (c)"], ["aXb (c)"], False),
])
def test_output_matches(expected: list[str], actual: list[str], matches: bool) -> None:
    assert output_matches(expected, actual) is matches


def test_clean_terminal_output_takes_what_a_reader_sees() -> None:
    raw = "\x1b[1mbold\x1b[0m\r\nprogress 1\rprogress 2\r\x1b[2K\r\ndone\r\n"
    assert clean_terminal_output(raw) == "bold\n\ndone\n"
    redrawn = "head\r\n  step ━━ 0/2\r\n\x1b[?25l\x1b[1A\x1b[2K  step ━━ 2/2\r\n\x1b[?25hsummary\r\n"
    assert clean_terminal_output(redrawn) == "head\n  step ━━ 2/2\nsummary\n"


def _session(tmp_path: Path) -> DocSession:
    work = tmp_path / "work"
    work.mkdir()
    return DocSession(work)


def test_blocks_of_a_doc_share_the_directory_and_the_shell_state(tmp_path: Path) -> None:
    session = _session(tmp_path)
    blocks = extract_blocks(
        "```bash\nexport COLOUR=blue\nLIST=(a b)\nmkdir sub && echo hi > sub/f\n```\n"
        "```console\n$ echo $COLOUR ${LIST[1]} $(cat sub/f)\nblue b hi\n$ cd sub && pwd | sed 's|.*/||'\nsub\n```\n"
        "```python\nimport os, pathlib\nassert pathlib.Path('f').read_text() == 'hi\\n', os.getcwd()\n```\n"
        "```sh\ntest \"$(basename \"$PWD\")\" = sub\n```\n",
        "d.md")
    for block in blocks:
        outcome = session.run(block)
        assert outcome.ok, outcome.message


def test_the_golden_store_is_where_the_docs_say(tmp_path: Path) -> None:
    session = _session(tmp_path)
    [block] = extract_blocks("```console\n$ ls tests/golden/rocketmq-4.9.8/basic/store/commitlog | head -1\n"
                             "00000000000000000000\n```\n", "d.md")
    assert session.run(block).ok


def test_rocketstore_is_the_venvs_command(tmp_path: Path) -> None:
    import sys

    session = _session(tmp_path)
    bin_dir = Path(sys.executable).parent
    [block] = extract_blocks(f"```bash\ntest \"$(command -v rocketstore)\" = {bin_dir}/rocketstore\n"
                             f"test \"$(command -v python)\" = {sys.executable}\n```\n", "d.md")
    outcome = session.run(block)
    assert outcome.ok, outcome.message


def test_a_failing_block_shows_its_text_and_output(tmp_path: Path) -> None:
    session = _session(tmp_path)
    bash, console, python = extract_blocks(
        "```bash\necho visible; false; echo never\n```\n"
        "```console\n$ echo one\n$ echo two\ntwo\n```\n"
        "```python\nraise SystemExit('python says no')\n```\n", "d.md")
    failed = session.run(bash)
    block_text, output = failed.message.split("--- output ---")
    assert not failed.ok and "echo never" in block_text and output.split() == ["visible"]
    failed = session.run(console)
    assert not failed.ok and "the output of `$ echo one` differs" in failed.message and "+one" in failed.message
    failed = session.run(python)
    assert not failed.ok and "python says no" in failed.message and "exited with 1" in failed.message


def test_a_command_that_hangs_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.docs import runner

    monkeypatch.setattr(runner, "BLOCK_TIMEOUT_S", 1)
    session = _session(tmp_path)
    [block] = extract_blocks("```console\n$ sleep 30\n```\n", "d.md")
    outcome = session.run(block)
    assert not outcome.ok and "timed out" in outcome.message


def test_a_script_that_hangs_is_stopped_with_what_it_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.docs import runner

    monkeypatch.setattr(runner, "BLOCK_TIMEOUT_S", 1)
    session = _session(tmp_path)
    [block] = extract_blocks("```bash\nsleep 300 &\necho $! > bg.pid\nsleep 30\n```\n", "d.md")
    outcome = session.run(block)
    assert not outcome.ok and "timed out after 1 s" in outcome.message
    pid = int((session.workdir / "bg.pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
