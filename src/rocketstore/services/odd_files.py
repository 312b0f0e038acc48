"""Store files of the wrong size: set aside (with their bytes kept) so that the store opens again.

RocketMQ refuses to load a commitlog, consume-queue or index file whose size differs from the
configured one, and so does a plain open here. A file cut short by an interrupted copy, or grown by
a tool, would then lock the store for good, so recovery offers a way out:

* an index file of the wrong size is moved to `quarantine/index/`, with every newer index file (the
  index is derived data: the open re-indexes the records after the remaining files);
* empty commitlog files but the last are removed, and commitlog files that follow a missing one are
  moved to `quarantine/commitlog-files/` (only when asked: `rocketstore recover`): the log starts after
  an empty first file, and ends where a hole begins;
* a commitlog file of the wrong size (only when asked: `rocketstore recover`) is copied to
  `quarantine/commitlog-files/` and then resized to the configured size, cut or zero-extended; the
  open then walks the log from that file on, as after a crash, and sets aside whatever no longer
  reads as whole records. When no commitlog file has the configured size, the configuration is wrong,
  not the files: nothing is touched.

Consume-queue files need nothing here: a queue that does not load is rebuilt from the commitlog by
recovery (`ConsumeQueue.layout_problem`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from rocketstore.errors import StoreLayoutError
from rocketstore.format.filenames import name_to_offset
from rocketstore.format.index import index_file_size
from rocketstore.format.store_dirs import COMMITLOG_DIR, INDEX_DIR
from rocketstore.storage import fs

COMMITLOG_FILES_DIR = "commitlog-files"


@dataclass
class OddFile:
    """A store file whose size differed from the configured one, and what recovery did with it."""

    file: str  # relative to the store root
    size: int
    expected: int
    saved_to: str
    action: str


@dataclass
class OddFiles:
    """What `set_aside` did: the files, and the offset of the first resized commitlog file (None if none)."""

    files: list[OddFile]
    first_resized_offset: int | None = None


def set_aside(root: Path, quarantine: Path, *, commitlog_file_size: int, index_slots: int, index_max_entries: int,
              resize_commitlog: bool) -> OddFiles:
    """Set aside the index files, and with `resize_commitlog` the commitlog files, of the wrong size;
    their bytes go under `quarantine`. Nothing is touched when no file of a kind has the configured
    size: the configuration is wrong then, not the files.

    Raises:
        StoreLayoutError: no commitlog file, or no index file, has the configured size.
        OSError: a copy or a move failed; the file it concerned is unchanged then.
    """
    commitlog = _sized(root / COMMITLOG_DIR)
    index = _sized(root / INDEX_DIR)
    index_size = index_file_size(index_slots, index_max_entries)
    _check_geometry(root / COMMITLOG_DIR, commitlog, commitlog_file_size, "commitlog", "--commitlog-file-size")
    _check_geometry(root / INDEX_DIR, index, index_size, "index",
                    f"--index-hash-slots and --index-max-entries ({index_slots} x {index_max_entries} make "
                    f"{index_size} bytes)")
    found = OddFiles(_index(root, index, quarantine, index_size))
    if resize_commitlog:
        _remove_empty(root / COMMITLOG_DIR, commitlog_file_size, found.files)
        commitlog = _after_gap(root, commitlog, quarantine, commitlog_file_size, found.files)
        found.first_resized_offset = _commitlog(commitlog, quarantine, commitlog_file_size, found.files)
    return found


def _remove_empty(directory: Path, expected: int, out: list[OddFile]) -> None:
    """Remove the empty commitlog files (a file emptied by a tool holds nothing to keep): the log
    then starts after an empty first file, and has a hole (`_after_gap`) after an empty later one. An
    empty last file is the open's to remove (a crash between creating a file and sizing it)."""
    if not directory.is_dir():
        return
    names = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name.isdigit())
    for name in names[:-1]:
        path = directory / name
        if path.stat().st_size == 0:
            path.unlink()
            out.append(OddFile(f"{COMMITLOG_DIR}/{name}", 0, expected, "", "removed: empty"))
    fs.fsync_dir(directory)


def _after_gap(root: Path, files: list[tuple[Path, int]], quarantine: Path, expected: int,
               out: list[OddFile]) -> list[tuple[Path, int]]:
    """Move the commitlog files that follow a missing one (a hole in the log, which no recovery can
    read across) to `quarantine/commitlog-files/`; the files before the hole."""
    offsets = [name_to_offset(path.name) for path, _ in files]
    gap = next((n for n in range(1, len(files)) if offsets[n] != (offsets[n - 1] or 0) + expected), None)
    if gap is None:
        return files
    target = quarantine / COMMITLOG_FILES_DIR
    target.mkdir(parents=True, exist_ok=True)
    missing = files[gap - 1][0].name
    for path, size in files[gap:]:
        saved = _free_name(target / path.name)
        os.replace(path, saved)
        out.append(OddFile(f"{COMMITLOG_DIR}/{path.name}", size, expected, str(saved),
                           f"set aside: the file after {missing} is missing, so the log ends there"))
    fs.fsync_dir(target)
    fs.fsync_dir(root / COMMITLOG_DIR)
    return files[:gap]


def _check_geometry(directory: Path, files: list[tuple[Path, int]], expected: int, kind: str, flags: str) -> None:
    if files and all(size != expected for _, size in files):
        sizes = sorted({size for _, size in files})
        raise StoreLayoutError(f"{directory}: no {kind} file has the configured size {expected} (sizes found: "
                               f"{', '.join(map(str, sizes))}): give the store's own geometry ({flags}, or "
                               "config/rocketstore.json) instead")


def _sized(directory: Path) -> list[tuple[Path, int]]:
    """(path, size) of the store files in `directory` (names that are numbers), oldest first; empty
    files are left out (a crash between creating a file and sizing it: the open removes them)."""
    if not directory.is_dir():
        return []
    found = ((p, p.stat().st_size) for p in sorted(directory.iterdir()) if p.is_file() and p.name.isdigit())
    return [(path, size) for path, size in found if size > 0]


def _index(root: Path, files: list[tuple[Path, int]], quarantine: Path, expected: int) -> list[OddFile]:
    first_odd = next((n for n, (_, size) in enumerate(files) if size != expected), None)
    if first_odd is None:
        return []
    target = quarantine / INDEX_DIR
    target.mkdir(parents=True, exist_ok=True)
    moved: list[OddFile] = []
    for path, size in files[first_odd:]:
        saved = _free_name(target / path.name)
        os.replace(path, saved)
        why = "wrong size" if size != expected else "newer than an index file of the wrong size"
        moved.append(OddFile(f"{INDEX_DIR}/{path.name}", size, expected, str(saved),
                             f"set aside ({why}); its records are indexed again"))
    fs.fsync_dir(target)
    fs.fsync_dir(root / INDEX_DIR)
    return moved


def _commitlog(files: list[tuple[Path, int]], quarantine: Path, expected: int, out: list[OddFile]) -> int | None:
    odd = [(path, size) for path, size in files if size != expected]
    if not odd:
        return None
    target = quarantine / COMMITLOG_FILES_DIR
    target.mkdir(parents=True, exist_ok=True)
    for path, size in odd:
        saved = _free_name(target / f"{path.name}.{size}.bin")
        _copy_durably(path, saved)
        _resize(path, expected)
        action = f"copied, then {'cut' if size > expected else 'zero-extended'} to {expected} bytes"
        out.append(OddFile(f"{COMMITLOG_DIR}/{path.name}", size, expected, str(saved), action))
    fs.fsync_dir(target)
    offsets = [name_to_offset(path.name) for path, _ in odd]
    return min(o for o in offsets if o is not None)


def _resize(path: Path, size: int) -> None:
    """Cut the file to `size`, or extend it with zeros, its blocks reserved as for a new file."""
    fd = os.open(path, os.O_RDWR)
    try:
        if os.fstat(fd).st_size > size:
            os.ftruncate(fd, size)
        else:
            fs.allocate(fd, size)
        fs.fsync_fd(fd)
    finally:
        os.close(fd)


def _copy_durably(source: Path, dest: Path) -> None:
    shutil.copyfile(source, dest)
    fd = os.open(dest, os.O_RDONLY)
    try:
        fs.fsync_fd(fd)
    finally:
        os.close(fd)


def _free_name(path: Path) -> Path:
    """`path`, or `path.N` for the first N not taken (an earlier recovery may have used the name)."""
    candidate, attempt = path, 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{attempt}")
        attempt += 1
    return candidate
