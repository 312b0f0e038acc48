"""Runs the code blocks of one user doc, as written, in order, in one temporary directory.

The rules (the block syntax and the output rule are in `blocks.py`):

- Each doc file gets a fresh directory, the blocks' working directory; its blocks run there in the
  order of the file, so a later block may use a store an earlier one wrote. The docs are written to be
  run from the repository root: the directory holds a copy of the golden RocketMQ store at the same
  relative path, `tests/golden/rocketmq-4.9.8/basic/store`.
- `python` blocks run as a script with the interpreter running the suite; they pass when it exits 0.
  Their output is not compared (a python block shows no output).
- `bash` and `sh` blocks run with `bash -e -o pipefail`; they pass when the script exits 0.
- `console` blocks run with bash in a pseudo-terminal of 160 columns, so that tables and progress look
  as in a terminal; what is compared is what a reader sees when a command is done (colours dropped, a
  line redrawn in place shown as it was left, `clean_terminal_output`). There is no `-e`: a command
  that fails shows it in its output (`rocketstore: error: ...`, or `; echo "exit $?"` written after
  it). Each command's output is compared with the lines under it (`blocks.output_matches`).
- Shell variables a shell block sets are there in the next shell block of the same file (`G=...` in one
  block, `$G` in the next); the working directory it leaves is where the next block of any language runs.
- A block marked `<!-- spark -->` runs under the suite's `spark` marker, with a longer timeout. A block
  that is not must not need what a Spark block made: `-m "not spark"` leaves the Spark blocks out.
- PATH starts with the interpreter's bin directory, so `rocketstore` and `python` are the venv's.
  Spark's variables are set as `./dev` sets them (SPARK_LOCAL_IP, PYSPARK_PYTHON,
  PYSPARK_DRIVER_PYTHON).
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import fcntl
import os
import pty
import re
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import GOLDEN_DIR, REPO_ROOT, copy_golden_store
from tests.docs.blocks import Block, ConsoleStep, console_steps, output_matches

TERMINAL_COLUMNS = 160
TERMINAL_LINES = 50
BLOCK_TIMEOUT_S = 120
SPARK_BLOCK_TIMEOUT_S = 900
_SEPARATOR = "\x1e"
_STEP = re.compile(_SEPARATOR + r"(\d+)" + _SEPARATOR + r"\r?\n")
_TERMINAL_TOKEN = re.compile(
    r"\x1b\[\??(?P<params>[0-9;]*)[ -/]*(?P<final>[@-~])"  # CSI: cursor moves, erase, colours, modes
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>78]"  # other escapes: dropped
    r"|(?P<text>[^\x1b]+|\x1b)"
)


def block_env() -> dict[str, str]:
    """The environment every block runs in."""
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ)
    env.update({
        "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "COLUMNS": str(TERMINAL_COLUMNS),
        "LINES": str(TERMINAL_LINES),
        "TERM": "xterm",
        "NO_COLOR": "1",
    })
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


@dataclass
class Outcome:
    """What running a block gave: `ok`, and when not, a message showing the block and its output."""

    ok: bool
    message: str = ""


class DocSession:
    """The directory and shell state the blocks of one doc share."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.scripts = workdir.parent / (workdir.name + "-scripts")
        self.scripts.mkdir(parents=True, exist_ok=True)
        self.shell_state = self.scripts / "shell-state.sh"
        self.cwd_file = self.scripts / "cwd"
        self.done: set[int] = set()  # lines of the blocks already run
        self.transcripts: dict[int, str] = {}  # a console block's commands and what each printed, by line
        golden = workdir / GOLDEN_DIR.relative_to(REPO_ROOT) / "store"
        golden.parent.mkdir(parents=True, exist_ok=True)
        copy_golden_store(golden)

    def run(self, block: Block) -> Outcome:
        self.done.add(block.line)
        timeout = SPARK_BLOCK_TIMEOUT_S if "spark" in block.markers else BLOCK_TIMEOUT_S
        if block.lang == "python":
            return self._run_python(block, timeout)
        if block.lang in ("bash", "sh"):
            return self._run_shell(block, timeout)
        if block.lang == "console":
            return self._run_console(block, timeout)
        raise ValueError(f"{block.case_id}: blocks of language {block.lang!r} are not run")

    @property
    def cwd(self) -> Path:
        """Where the last shell block left its working directory (the session's directory at first)."""
        return Path(self.cwd_file.read_text()) if self.cwd_file.exists() else self.workdir

    def _script(self, block: Block, suffix: str, text: str) -> Path:
        path = self.scripts / f"L{block.line}{suffix}"
        path.write_text(text, encoding="utf-8")
        return path

    def _run_python(self, block: Block, timeout: float) -> Outcome:
        script = self._script(block, ".py", block.text)
        return self._outcome(block, [sys.executable, str(script)], timeout)

    def _outcome(self, block: Block, argv: list[str], timeout: float) -> Outcome:
        """Run `argv` for `block` in its own session, output captured; passes on exit code 0."""
        proc = subprocess.Popen(argv, cwd=self.cwd, env=block_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
            what = f"exited with {proc.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            what = f"timed out after {timeout} s"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode == 0:
            return Outcome(True)
        return Outcome(False, _report(block, what, out.decode("utf-8", "replace")))

    def _shell_script(self, body: str) -> str:
        """`body` wrapped so that it starts from the state the previous shell block left, and leaves its own."""
        state = shlex.quote(str(self.shell_state))
        return "\n".join([
            "__docs_base=\" $(compgen -v | tr '\\n' ' ') \"",
            f"cd {shlex.quote(str(self.workdir))}",
            f"[ -f {state} ] && source {state}",
            "__docs_save() {",
            "  for __docs_v in $(compgen -v); do",
            "    case \"$__docs_base\" in *\" $__docs_v \"*) ;;",
            "      *) [[ $__docs_v == __docs* ]] || declare -p \"$__docs_v\";; esac",
            f"  done > {state} 2>/dev/null",
            f"  printf 'cd %q\\n' \"$PWD\" >> {state}",
            f"  printf '%s' \"$PWD\" > {shlex.quote(str(self.cwd_file))}",
            "}",
            "trap __docs_save EXIT",
            body,
        ]) + "\n"

    def _run_shell(self, block: Block, timeout: float) -> Outcome:
        script = self._script(block, ".sh", self._shell_script(block.text))
        return self._outcome(block, ["bash", "-e", "-o", "pipefail", str(script)], timeout)

    def _run_console(self, block: Block, timeout: float) -> Outcome:
        steps = console_steps(block)
        body = "\n".join(f"printf '{_SEPARATOR}%d{_SEPARATOR}\\n' {n}\n{step.command}" for n, step in enumerate(steps))
        script = self._script(block, ".console.sh", self._shell_script(body))
        code, raw = run_in_terminal(["bash", str(script)], self.workdir, timeout)
        outputs = split_steps(raw, len(steps))
        self.transcripts[block.line] = transcript(steps, outputs)
        for n, step in enumerate(steps):
            if not output_matches(step.expected, outputs[n]):
                diff = "\n".join(difflib.unified_diff(list(step.expected), outputs[n], "shown", "printed", lineterm=""))
                return Outcome(False, _report(block, f"the output of `$ {step.command}` differs", diff,
                                              "what it printed", self.transcripts[block.line]))
        if code is None:
            return Outcome(False, _report(block, f"timed out after {timeout} s", self.transcripts[block.line]))
        return Outcome(True)


def _report(block: Block, what: str, output: str, *more: str) -> str:
    parts = [f"{block.case_id} ({block.lang}): {what}", "--- block ---", block.text.rstrip(),
             "--- output ---" if not more else "--- difference ---", output.rstrip()]
    for title, text in zip(more[::2], more[1::2], strict=True):
        parts += [f"--- {title} ---", text.rstrip()]
    return "\n".join(parts)


def clean_terminal_output(raw: str) -> str:
    """Terminal output as a reader sees it once the command is done: the text is laid out on a screen of
    unbounded height, so a line redrawn in place (a carriage return, or a progress display moving the
    cursor up and erasing lines) shows as it was left; colours and other escape sequences are dropped."""
    screen: list[list[str]] = [[]]
    row = col = 0
    for token in _TERMINAL_TOKEN.finditer(raw):
        text, csi, final = token.group("text"), token.group("params"), token.group("final")
        if text is not None:
            for char in text:
                if char == "\n":
                    row, col = row + 1, 0
                    while len(screen) <= row:
                        screen.append([])
                elif char == "\r":
                    col = 0
                elif char == "\b":
                    col = max(col - 1, 0)
                elif char >= " " or char == "\t":
                    line = screen[row]
                    line.extend(" " * (col - len(line)))
                    if col < len(line):
                        line[col] = char
                    else:
                        line.append(char)
                    col += 1
        elif final is not None:
            count = int(csi) if csi and csi.isdigit() else 1
            if final == "A":
                row = max(row - count, 0)
            elif final == "B":
                row += count
                while len(screen) <= row:
                    screen.append([])
            elif final == "G":
                col = count - 1
            elif final == "K":
                mode = csi or "0"
                screen[row] = [] if mode == "2" else screen[row][:col] if mode == "0" else screen[row]
    return "\n".join("".join(line).rstrip() for line in screen)


def transcript(steps: list[ConsoleStep], outputs: list[list[str]]) -> str:
    """A console block as it ran: each command after `$ `, then what it printed."""
    lines: list[str] = []
    for step, output in zip(steps, outputs, strict=True):
        lines.append("$ " + step.command)
        lines += [line.rstrip() for line in output]
        while lines and not lines[-1]:
            lines.pop()
    return "\n".join(lines) + "\n"


def split_steps(raw: str, count: int) -> list[list[str]]:
    """The output of each of `count` commands, by the separators the script printed before each."""
    outputs: list[list[str]] = [[] for _ in range(count)]
    pieces = _STEP.split(raw)
    for number, chunk in zip(pieces[1::2], pieces[2::2], strict=True):
        text = clean_terminal_output(chunk)
        outputs[int(number)] = text.split("\n") if text else []
    return outputs


def run_in_terminal(argv: list[str], cwd: Path, timeout: float) -> tuple[int | None, str]:
    """Run `argv` with stdin, stdout and stderr on a new pseudo-terminal; its exit code (None after a
    timeout, the process group then killed) and everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", TERMINAL_LINES, TERMINAL_COLUMNS, 0, 0))
    proc = subprocess.Popen(argv, cwd=cwd, env=block_env(), stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if proc.poll() is not None and not _has_data(master):
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError as exc:  # EIO: every holder of the terminal closed it
                if exc.errno != errno.EIO:
                    raise
                break
            if not data:
                break
            chunks.append(data)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    finally:
        os.close(master)
    timed_out = time.monotonic() >= deadline
    try:
        code: int | None = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        code = None
    with contextlib.suppress(ProcessLookupError):  # whatever the block left running in the background
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return (None if timed_out else code), b"".join(chunks).decode("utf-8", "replace")


def _has_data(fd: int) -> bool:
    ready, _, _ = select.select([fd], [], [], 0)
    return bool(ready)
