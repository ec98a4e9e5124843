"""Where dralab writes files: every output path is checked before any work, and written beside its target.

An output path is user input like any other, and dralab often runs as root: `--log /dev/sda` or a symlink
planted in a shared folder must never be replaced by a regular file, and a path that cannot be written
must be found before a long run, not after it (its summary lost). So:

- `check_file` refuses, before the work, a target that is a directory, a device, a FIFO, a socket or a
  symbolic link, and a parent that does not exist or cannot be written;
- `open_part` writes to `FILE.part` beside the target, created exclusively and never through a link (a
  stale regular `.part` from a crashed run is removed first; anything else there is refused);
- `commit_part` renames it over the target only if the target is still absent or a regular file
  (checked again: the folder may have changed during the run); `discard_part` removes it on failure.

`atomic_output` puts the three together for code that writes a whole file at once. The rules are the
same for every command; docs/cli.md ("Output paths") states them.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

PART_SUFFIX = ".part"
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


class OutputPathError(Exception):
    """An output path dralab will not write; the message names the option and the path (exit 2)."""


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return None if stat.S_ISREG(mode) else "not a regular file"


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None


def _refuse_kind(path: Path, option: str, what: str = "") -> None:
    st = _lstat(path)
    if st is not None and (kind := _kind(st.st_mode)) is not None:
        hint = "; dralab never replaces a link" if stat.S_ISLNK(st.st_mode) else ""
        raise OutputPathError(f"{option}: {path}{what} is {kind}, not a regular file{hint}: name another path")


def _writable_folder(folder: Path, option: str, path: Path | str) -> None:
    if not folder.is_dir():
        raise OutputPathError(f"{option}: {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option}: {path}: the folder {folder} is not writable")


def check_file(path: str | os.PathLike[str], option: str) -> Path:
    """The output file `path` (for `option`), or OutputPathError if dralab would not write it."""
    text = os.fspath(path)
    if not text:
        raise OutputPathError(f"{option}: an empty path")
    if text.endswith(os.sep) or os.path.basename(text) in ("", ".", ".."):
        raise OutputPathError(f"{option}: {text} names a folder, not a file")
    target = Path(text)
    _refuse_kind(target, option)
    _refuse_kind(part_path(target), option, f" (its temporary file {part_path(target).name})")
    folder = target.absolute().parent
    _writable_folder(folder, option, text)
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputPathError(f"{option}: {text} is not writable")
    return target


def check_dir(path: str | os.PathLike[str], option: str) -> Path:
    """An output folder (created later if missing): its parent must exist and be writable; if it exists
    it must be a writable folder (a symlink to one is followed: the files written in it are not)."""
    text = os.fspath(path)
    if not text:
        raise OutputPathError(f"{option}: an empty path")
    folder = Path(text)
    if folder.exists():
        if not folder.is_dir():
            st = folder.stat()
            raise OutputPathError(f"{option}: {text} is {_kind(st.st_mode) or 'a file'}, not a folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputPathError(f"{option}: {text} is not writable")
        return folder
    if folder.is_symlink():
        raise OutputPathError(f"{option}: {text} is a dangling symbolic link, not a folder")
    _writable_folder(folder.absolute().parent, option, text)
    return folder


def make_dir(path: str | os.PathLike[str], option: str) -> Path:
    """`check_dir`, then create the folder if missing."""
    folder = check_dir(path, option)
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{option}: {folder}: cannot create the folder: {exc.strerror or exc}") from None
    return folder


def part_path(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p.with_name(p.name + PART_SUFFIX)


def open_part(path: str | os.PathLike[str], option: str = "output") -> tuple[IO[bytes], Path]:
    """A new `path.part` opened for writing, exclusively, never through a symbolic link."""
    tmp = part_path(path)
    st = _lstat(tmp)
    if st is not None:
        if _kind(st.st_mode) is not None:
            _refuse_kind(tmp, option)
        tmp.unlink()  # a stale temporary file of a run that died: ours to replace
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o644)
    except OSError as exc:
        raise OutputPathError(f"{option}: {tmp}: cannot create: {exc.strerror or exc}") from None
    return os.fdopen(fd, "wb"), tmp


def commit_part(tmp: Path, path: str | os.PathLike[str], option: str = "output") -> None:
    """Rename the finished `tmp` over `path`, unless `path` has meanwhile become something dralab does
    not replace (then `tmp` stays, and the error says where the data is)."""
    target = Path(path)
    st = _lstat(target)
    if st is not None and (kind := _kind(st.st_mode)) is not None:
        raise OutputPathError(f"{option}: {target} became {kind} during the run; not replaced: the output "
                              f"is in {tmp}")
    os.replace(tmp, target)


def discard_part(fh: IO[Any] | None, tmp: Path) -> None:
    """Close and remove an unfinished temporary file; never raises (it runs on the way out of a failure)."""
    if fh is not None:
        with contextlib.suppress(OSError):
            fh.close()
    with contextlib.suppress(OSError):
        tmp.unlink()


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], option: str, *, text: bool = False) -> Iterator[IO[Any]]:
    """Write a whole file: `FILE.part` beside it, renamed into place when the block ends, removed if it
    raises. `text`: a UTF-8 text stream instead of bytes."""
    check_file(path, option)
    raw, tmp = open_part(path, option)
    fh: IO[Any] = raw
    try:
        if text:
            import io

            fh = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        yield fh
        fh.flush()
        os.fsync(raw.fileno())
        fh.close()
        commit_part(tmp, path, option)
    except BaseException:
        discard_part(fh, tmp)
        raise
