"""Output paths (issue 18, defects 3 and 4, and one meaning of `-o`): every option that writes is checked
before any work; a directory, a device, a FIFO, a socket or a symbolic link is refused with exit 2 and left
as it was; the temporary file sits beside the target and is removed on any failure; no traceback.

Every special file here is made inside tmp_path (the character device is a private node made with mknod,
skipped where that is not allowed): nothing outside the test's folder is ever written.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dralab.cli import main
from dralab.replay.logs.logfile import LogWriter, make_header, read_log
from dralab.replay.logs.output_files import (
    OutputPathError,
    atomic_output,
    check_dir,
    check_file,
    commit_part,
    open_part,
    part_path,
)

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "scenarios" / "quickstart.yaml")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("recorded") / "a.dralog"
    assert main(["sim", QUICKSTART, "--seed", "7", "--log", str(path), "-o", "json"]) == 0
    return path


def _fifo(d: Path) -> Path:
    p = d / "fifo"
    os.mkfifo(p)
    return p


def _symlink(d: Path) -> Path:
    victim = d / "victim.txt"
    victim.write_text("keep me\n")
    link = d / "link"
    link.symlink_to(victim)
    return link


def _dangling(d: Path) -> Path:
    link = d / "dangling"
    link.symlink_to(d / "nowhere" / "x")
    return link


def _directory(d: Path) -> Path:
    p = d / "adir"
    p.mkdir()
    return p


def _socket(d: Path) -> Path:
    p = d / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()  # the socket file stays
    return p


def _device(d: Path) -> Path:
    p = d / "null"
    try:
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("mknod is not allowed here")
    return p


SPECIAL: dict[str, Callable[[Path], Path]] = {
    "fifo": _fifo, "symlink": _symlink, "dangling-symlink": _dangling, "directory": _directory,
    "socket": _socket, "device": _device,
}


def _state(p: Path) -> tuple[int, int, str]:
    st = p.lstat()
    body = ""
    if stat.S_ISLNK(st.st_mode):
        body = os.readlink(p)
    return st.st_mode, st.st_ino, body


def _commands(recorded: Path, out: Path) -> dict[str, list[str]]:
    return {
        "sim --log": ["sim", QUICKSTART, "--log", str(out)],
        "run --log": ["run", QUICKSTART, "--embedded", "--log", str(out)],
        "replay --with --log": ["replay", str(recorded), "--with", "autoscaler.policy=dra", "--log", str(out)],
        "shrink --log": ["shrink", str(recorded), "--until", "pod-pending", "--log", str(out)],
        "report --html": ["report", str(recorded), "--html", str(out)],
        "record --log": ["record", "--redis", "redis://127.0.0.1:1/0", "--stream", "s", "--log", str(out)],
    }


@pytest.mark.parametrize("kind", sorted(SPECIAL))
@pytest.mark.parametrize("command", ["sim --log", "run --log", "replay --with --log", "shrink --log",
                                     "report --html", "record --log"])
def test_special_targets_are_refused_and_left_alone(
    kind: str, command: str, recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = SPECIAL[kind](tmp_path)
    before = _state(target)
    listing = sorted(os.listdir(tmp_path))
    victim = tmp_path / "victim.txt"
    assert main(_commands(recorded, target)[command]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert str(target) in err and ("--log" in err or "--html" in err), err
    assert _state(target) == before, "the target was replaced"
    assert sorted(os.listdir(tmp_path)) == listing, "something was left beside the target"
    if victim.exists():
        assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize("command", ["sim --log", "run --log", "replay --with --log", "shrink --log",
                                     "report --html", "record --log"])
def test_missing_folder_is_found_before_the_work(
    command: str, recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "nonexistent" / "x.out"
    assert main(_commands(recorded, out)[command]) == 2
    err = capsys.readouterr()
    assert "does not exist" in err.err and "Traceback" not in err.err
    assert err.out == "", "work was done (a summary printed) before the path was checked"


def test_a_regular_file_is_replaced_and_nothing_is_left_beside_it(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "old.dralog"
    out.write_bytes(b"old contents")
    (tmp_path / "old.dralog.part").write_bytes(b"a stale temporary file of a run that died")
    assert main(["sim", QUICKSTART, "--log", str(out), "-o", "json"]) == 0
    assert read_log(out).entries
    assert sorted(os.listdir(tmp_path)) == ["old.dralog"]


@pytest.mark.parametrize("option", ["--png-dir", "--csv-dir", "--log-dir", "--out"])
@pytest.mark.parametrize("kind", ["fifo", "symlink", "socket"])
def test_output_folders_refuse_what_is_not_a_folder(
    option: str, kind: str, recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = SPECIAL[kind](tmp_path)  # a link here points to a file: not a folder (a link to a folder is followed)
    before = _state(target)
    argv = {
        "--png-dir": ["report", str(recorded), "--html", str(tmp_path / "r.html"), "--png-dir", str(target)],
        "--csv-dir": ["trace", "openb", "--nodes", "n.csv", "--pods", "p.csv", "--policy", "fgd", "--seeds", "1",
                      "--csv-dir", str(target)],
        "--log-dir": ["trace", "philly", "--job-list", "j.csv", "--log-dir", str(target)],
        "--out": ["chaos", QUICKSTART, "--seeds", "1", "--out", str(target), "--quiet"],
    }[option]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert option in err and "Traceback" not in err, err
    assert _state(target) == before
    assert not (tmp_path / "r.html").exists()


def test_png_files_are_never_written_through_a_link(recorded: Path, tmp_path: Path) -> None:
    plots = tmp_path / "plots"
    plots.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (plots / "pending.png").symlink_to(victim)
    assert main(["report", str(recorded), "--html", str(tmp_path / "r.html"), "--png-dir", str(plots)]) == 2
    assert victim.read_text() == "keep me\n"
    assert (plots / "pending.png").is_symlink()


# -- the module itself -------------------------------------------------------------------------------------


def test_check_file_accepts_new_and_regular_files(tmp_path: Path) -> None:
    check_file(tmp_path / "new.dralog", "--log")
    (tmp_path / "old").write_text("x")
    check_file(tmp_path / "old", "--log")
    with pytest.raises(OutputPathError, match="names a folder"):
        check_file(str(tmp_path) + os.sep, "--log")
    with pytest.raises(OutputPathError, match="empty path"):
        check_file("", "--log")


def test_a_special_temporary_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "x.dralog"
    part_path(target).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputPathError, match=r"x\.dralog\.part"):
        check_file(target, "--log")
    with pytest.raises(OutputPathError):
        open_part(target, "--log")
    assert not (tmp_path / "elsewhere").exists()


def test_commit_refuses_a_target_that_became_a_link(tmp_path: Path) -> None:
    target = tmp_path / "x.dralog"
    fh, tmp = open_part(target, "--log")
    fh.write(b"data")
    fh.close()
    target.symlink_to(tmp_path / "victim")
    with pytest.raises(OutputPathError, match="became a symbolic link"):
        commit_part(tmp, target, "--log")
    assert target.is_symlink() and tmp.read_bytes() == b"data"


def test_atomic_output_removes_its_temporary_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    with pytest.raises(RuntimeError), atomic_output(target, "--html", text=True) as f:
        f.write("half")
        raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_log_writer_leaves_nothing_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "x.dralog"
    header = make_header(scenario="s", seed=0, policy={}, mode="sim")
    with pytest.raises(RuntimeError), LogWriter(target, header) as w:
        w.write(1, b"\x00")
        raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_check_dir_follows_a_link_to_a_folder(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    assert check_dir(tmp_path / "alias", "--png-dir").is_dir()
    with pytest.raises(OutputPathError, match="does not exist"):
        check_dir(tmp_path / "no" / "such", "--png-dir")


# -- `-o` is a format in every command ----------------------------------------------------------------------


@pytest.fixture
def cwd_tmp(tmp_path: Path) -> Iterator[Path]:
    old = os.getcwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(old)


def test_report_o_json_is_a_format(recorded: Path, cwd_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(recorded), "-o", "json"]) == 2  # no file named "json" is written
    assert "--html" in capsys.readouterr().err
    assert not (cwd_tmp / "json").exists()
    assert main(["report", str(recorded), "--html", "r.html", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["html"] == "r.html" and (cwd_tmp / "r.html").is_file()


def test_old_style_o_file_still_works_with_a_warning(recorded: Path, cwd_tmp: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(recorded), "-o", "old.html"]) == 0
    err = capsys.readouterr().err
    assert "--html old.html" in err
    assert (cwd_tmp / "old.html").is_file()


def test_shrink_o_json_and_summary_alias(recorded: Path, cwd_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["shrink", str(recorded), "--until", "pod-pending", "--log", "s.dralog", "-o", "json", "--quiet"])
    summary = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and summary["file"] == str(recorded)
    assert main(["shrink", str(recorded), "--until", "pod-pending", "-o", "json", "--summary", "text"]) == 2
    assert "disagree" in capsys.readouterr().err


def test_unknown_format_is_refused(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", QUICKSTART, "--seeds", "1", "-o", "yaml"]) == 2
    assert "not an output format" in capsys.readouterr().err
