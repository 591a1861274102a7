"""Files tuimeter writes in directories others may share (issue 9, items 1 and 3): it
never writes a session into anything but a regular file, never follows a link planted at
the name, and only ever removes a file it created itself in this run. The figures of the
hostile cases (message and exit status) are asserted end to end on the real program."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys

import pytest

from tests.fakes.powercap import FakePowercap
from tests.test_record_cli import ROOT, env_for, tuimeter
from tuimeter.session import files
from tuimeter.session.csvfile import SessionWriter

# /dev/full makes every write fail (the header write then removed the file: as root,
# `-o /dev/full` deleted the real /dev/full); /dev/null swallows a whole session
DEVICES = {"full": (1, 7), "null": (1, 3)}


def _device(tmp_path, name: str) -> str:
    """A copy of /dev/full or /dev/null made with mknod (root only)."""
    path = str(tmp_path / f"dev-{name}")
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(*DEVICES[name]))
    except PermissionError as exc:
        pytest.skip(f"mknod needs root (CAP_MKNOD): {exc}")
    return path


def _fifo(tmp_path) -> str:
    path = str(tmp_path / "fifo")
    os.mkfifo(path)
    return path


def _unix_socket(tmp_path):
    path = str(tmp_path / "sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    return path, s


def _same_node(path: str, before: os.stat_result) -> bool:
    after = os.lstat(path)
    return (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino,
                                                            before.st_rdev)


def _record(tmp_path, *args, timeout: float = 60) -> subprocess.CompletedProcess:
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    return subprocess.run(tuimeter("record", "--no-gpu", "--no-socket", "--duration", "0.3",
                                   "--interval", "0.1", "-q", *args),
                          env=env_for(tmp_path, fake), cwd=tmp_path, capture_output=True,
                          text=True, timeout=timeout)


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


# -- not a regular file ------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(DEVICES))
def test_record_refuses_a_character_device_and_leaves_it(tmp_path, name):
    """`record -o F` on a character device: one line, exit 2, the device untouched. Before,
    a copy of /dev/full was unlinked after the failed header write and a copy of
    /dev/null took the whole session (exit 0, nothing kept)."""
    dev = _device(tmp_path, name)
    before = os.lstat(dev)
    r = _record(tmp_path, "-o", dev)
    assert r.returncode == 2
    assert "is a character device, not a regular file" in _one_line(r.stderr)
    assert _same_node(dev, before)


def test_record_refuses_a_fifo_without_waiting_on_it(tmp_path):
    """A FIFO is not opened at all (opening one for writing blocks until a reader
    comes): one line, exit 2, the FIFO still there."""
    fifo = _fifo(tmp_path)
    before = os.lstat(fifo)
    r = _record(tmp_path, "-o", fifo, timeout=60)
    assert r.returncode == 2 and "is a FIFO" in _one_line(r.stderr)
    assert _same_node(fifo, before)


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
@pytest.mark.parametrize("mode", [{}, {"overwrite": True}, {"append": True}])
def test_writer_writes_only_regular_files(tmp_path, kind, mode):
    """The writer under the CLI, the UI and the API (`Meter(output=...)`): no mode makes
    it write into, replace or remove a FIFO, a socket or a device."""
    held = None
    if kind == "fifo":
        path = _fifo(tmp_path)
    elif kind == "socket":
        path, held = _unix_socket(tmp_path)
    else:
        path = _device(tmp_path, "null")
    before = os.lstat(path)
    try:
        with pytest.raises(files.UnsafeTarget, match="not a regular file"):
            SessionWriter.create(path, "h", **mode)
        assert _same_node(path, before)
    finally:
        if held is not None:
            held.close()


# -- links planted at the name -----------------------------------------------------------
@pytest.mark.parametrize("mode", [{}, {"overwrite": True}, {"append": True}])
def test_a_planted_symlink_is_never_followed(tmp_path, mode):
    """`ln -s /secret/new.conf shared/run.csv` by someone else: the target is neither
    created nor (with overwrite or append) clobbered, and the link stays."""
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    missing, existing = secret_dir / "new.conf", secret_dir / "old.conf"
    existing.write_text("precious\n")
    for target in (missing, existing):
        link = tmp_path / f"run-{target.stem}.csv"
        link.symlink_to(target)
        with pytest.raises(files.UnsafeTarget, match="symbolic link"):
            SessionWriter.create(link, "h", **mode)
        assert os.path.islink(link)
    assert not missing.exists() and existing.read_text() == "precious\n"


def test_record_o_on_a_planted_symlink_is_exit_2(tmp_path):
    """End to end, with --overwrite: one line, exit 2, the link's target untouched."""
    target = tmp_path / "new.conf"
    (tmp_path / "run.csv").symlink_to(target)
    r = _record(tmp_path, "-o", "run.csv", "--overwrite")
    assert r.returncode == 2 and "symbolic link" in _one_line(r.stderr)
    assert not target.exists() and os.path.islink(tmp_path / "run.csv")


def test_overwrite_replaces_the_name_not_the_file_behind_it(tmp_path):
    """--overwrite renames a new file over the name: another hard link to the old file
    (a file the name happened to share) keeps its contents; it used to be truncated in
    place through the name."""
    old = tmp_path / "elsewhere.csv"
    old.write_text("precious\n")
    os.link(old, tmp_path / "run.csv")
    SessionWriter.create(tmp_path / "run.csv", "h", overwrite=True).close()
    assert old.read_text() == "precious\n"
    assert (tmp_path / "run.csv").read_text().startswith("timestamp,")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# -- a failed start removes only what it created -------------------------------------------
def _scripts(tmp_path):
    """A script without the execute bit, and one whose interpreter does not exist (found
    and executable, so only the start itself fails)."""
    not_exec = tmp_path / "not-executable.sh"
    not_exec.write_text("echo hi\n")
    bad_interp = tmp_path / "bad-interpreter.sh"
    bad_interp.write_text("#!/nonexistent/interpreter\n")
    bad_interp.chmod(0o755)
    return {"not-executable": "./not-executable.sh", "bad-interpreter": "./bad-interpreter.sh"}


@pytest.mark.parametrize("script", ["not-executable", "bad-interpreter"])
@pytest.mark.parametrize("before, flags", [("", []), ("precious\n", ["--overwrite"])])
def test_record_failed_start_leaves_an_existing_file_untouched(tmp_path, script, before,
                                                               flags):
    """`record -o F -- CMD` where CMD cannot start: F (empty, or a session that
    --overwrite was to replace) is exactly as it was; before, it was deleted."""
    cmd = _scripts(tmp_path)[script]
    out = tmp_path / "F.csv"
    out.write_text(before)
    r = _record(tmp_path, "-o", "F.csv", *flags, "--", cmd)
    assert r.returncode == 2 and f"cannot run {cmd}" in _one_line(r.stderr)
    assert out.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == sorted(
        ["F.csv", "not-executable.sh", "bad-interpreter.sh"])


def test_record_failed_start_removes_the_file_it_created(tmp_path):
    """A new F that this run created is removed again: nothing is left of a start that
    failed."""
    cmd = _scripts(tmp_path)["not-executable"]
    r = _record(tmp_path, "-o", "F.csv", "--", cmd)
    assert r.returncode == 2 and not (tmp_path / "F.csv").exists()


def test_remove_leaves_a_file_put_in_its_place(tmp_path):
    """NewFile.remove checks the inode: a file someone put at the name since is not ours
    and stays."""
    new = files.create_new(tmp_path / "F.csv")
    os.unlink(tmp_path / "F.csv")
    (tmp_path / "F.csv").write_text("someone else's\n")
    assert new.remove() is False
    os.close(new.fd)
    assert (tmp_path / "F.csv").read_text() == "someone else's\n"


@pytest.mark.parametrize("before, flags", [("", []), ("precious\n", ["--overwrite"])])
def test_ui_failed_start_leaves_the_file_and_its_log_untouched(tmp_path, monkeypatch, before,
                                                               flags):
    """The UI form `tuimeter -o F -- CMD`: F and F.log stay as they were (the log was
    truncated with --overwrite, and both were deleted)."""
    from tuimeter.tui.run import build

    _scripts(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TUIMETER_POWERCAP_ROOT",
                       str(FakePowercap(tmp_path / "sys").intel_desktop().sensor_root))
    (tmp_path / "F.csv").write_text(before)
    (tmp_path / "F.log").write_text("the last run's output\n")
    session, problem = build(["-o", "F.csv", *flags, "--no-gpu", "--no-socket", "--",
                              "./not-executable.sh"], start_engine=False)
    assert session is None and problem == "cannot run ./not-executable.sh: Permission denied"
    assert (tmp_path / "F.csv").read_text() == before
    assert (tmp_path / "F.log").read_text() == "the last run's output\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("F")) == [
        "F.csv", "F.log"]


# -- the command's .log and the `e` export -------------------------------------------------
def test_log_never_follows_a_planted_symlink(tmp_path):
    """BASE.log planted as a link: without --overwrite the next free name is used; with
    it the link is refused. The link's target is never created."""
    from tuimeter.live import open_log as _open_log

    target = tmp_path / "target.conf"
    (tmp_path / "run.log").symlink_to(target)
    log = _open_log(str(tmp_path / "run"))
    os.close(log.fd)
    assert log.path == str(tmp_path / "run-2.log")
    with pytest.raises(files.UnsafeTarget, match="symbolic link"):
        _open_log(str(tmp_path / "run"), overwrite=True)
    assert not target.exists() and os.path.islink(tmp_path / "run.log")


def test_ui_overwrite_replaces_the_log_through_rename(tmp_path, monkeypatch):
    """`tuimeter -o F --overwrite -- CMD`: F.log is a new file renamed over the old one
    once the command has started (a hard link to the old log keeps its contents)."""
    from tuimeter.tui.run import build

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TUIMETER_POWERCAP_ROOT",
                       str(FakePowercap(tmp_path / "sys").intel_desktop().sensor_root))
    (tmp_path / "old.log").write_text("old output\n")
    os.link(tmp_path / "old.log", tmp_path / "F.log")
    session, problem = build(["-o", "F.csv", "--overwrite", "--no-gpu", "--no-socket", "--",
                              sys.executable, "-c", "print('new output')"],
                             start_engine=False)
    assert problem is None
    session.job.popen.wait(30)
    session.app.finish()
    session.close()
    assert (tmp_path / "F.log").read_text() == "new output\n"
    assert (tmp_path / "old.log").read_text() == "old output\n"


def test_export_skips_a_planted_name(tmp_path):
    """`e` picks a new name: one taken by a planted link is skipped, its target never
    created, and the copy goes through the descriptor it created."""
    import datetime as dt

    from tuimeter.tui.app import copy_complete_rows, export_file

    now = dt.datetime(2026, 11, 30, 12, 0, 0)
    target = tmp_path / "target.conf"
    (tmp_path / "tuimeter-export-20261130-120000.csv").symlink_to(target)
    src = tmp_path / "s.csv"
    src.write_text("a,b\n1,2\n")
    dst = export_file(str(tmp_path), now)
    assert dst.path.endswith("tuimeter-export-20261130-120000-2.csv")
    copy_complete_rows(str(src), dst)
    assert open(dst.path).read() == "a,b\n1,2\n" and not target.exists()


# -- another user on the same machine ----------------------------------------------------
@pytest.fixture
def other_user():
    """A second, unprivileged user (created with useradd when the tests run as root, as
    in CI; removed after). Yields its uid."""
    import shutil
    import uuid

    if os.geteuid() != 0:
        pytest.skip("needs root to create a second user with useradd")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    name = f"tmhostile{uuid.uuid4().hex[:8]}"
    r = subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"useradd failed: {r.stderr.strip()}")
    try:
        import pwd

        yield pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def _as_user(uid: int, fn) -> None:
    """Run ``fn`` in a child process with ``uid`` (and no privileges)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(uid)
            fn()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux users")
def test_a_link_planted_by_another_user_in_a_shared_directory(tmp_path, other_user):
    """The attack as the issue describes it: in a shared sticky directory (like /tmp),
    another user plants `run.csv -> /secret/new.conf` and `run.log -> /secret/old.conf`;
    root records with `-o run.csv --overwrite -- CMD`. Nothing of root's is created or
    clobbered, the links stay theirs, and root gets one line, exit 2."""
    import shutil
    import tempfile
    from pathlib import Path

    secret = tmp_path / "secret"
    secret.mkdir(mode=0o700)
    (secret / "old.conf").write_text("root's\n")
    # tmp_path's parents are root's alone: the shared folder must be reachable by both
    shared = Path(tempfile.mkdtemp(prefix="tuimeter-shared-", dir="/tmp"))
    try:
        shared.chmod(0o1777)
        _as_user(other_user, lambda: (os.symlink(secret / "new.conf", shared / "run.csv"),
                                      os.symlink(secret / "old.conf", shared / "run.log")))
        r = _record(tmp_path, "-o", str(shared / "run.csv"), "--overwrite", "--", "true")
        assert r.returncode == 2 and "is a symbolic link" in _one_line(r.stderr)
        assert not (secret / "new.conf").exists()
        assert (secret / "old.conf").read_text() == "root's\n"
        assert os.lstat(shared / "run.csv").st_uid == other_user
    finally:
        shutil.rmtree(shared)
