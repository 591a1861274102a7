"""The session CSV writer: a Snapshot becomes rows (the format, its columns, row kinds and
how a row is rendered, is defined once in :mod:`.schema`; docs/session-csv.md).

``pandas.read_csv(path)`` loads a session with no options: a single header line, comma
separated, ISO 8601 UTC timestamps, empty cells for missing values. Rows are written per
tick (one per domain, one ``total``, markers, events, attribution) and flushed at every
tick, so a ``kill -9`` loses at most the tick being written.

A row whose content cannot be written (text that is not valid Unicode, such as a
process name with undecodable bytes, or a value of the wrong type) is refused alone:
an ``event`` row says so in its place and the tick, the file and the session go on.
Only the file itself failing (disk full, removed) ends a recording.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from typing import IO

from ..model import CarbonInfo, Domain, Snapshot
from ..points import points
from . import files, schema
from .files import NewFile
from .ids import new_session_id
from .schema import (CGROUP, COLUMNS, EVENT, JOB, LOST, MARKER, PROCESS, SAMPLE, SESSION,
                     SETTINGS, SETTLED, TOTAL, TREE, Row, bridged_label, render, tree_label)

__all__ = ["COLUMNS", "SessionWriteError", "SessionWriter", "bridged_label"]

log = logging.getLogger(__name__)


class SessionWriteError(OSError):
    """Writing the session file failed (disk full, file removed, ...)."""


def _fdopen(fd: int, mode: str) -> IO[str]:
    return os.fdopen(fd, mode, newline="", encoding="utf-8")


class SessionWriter:
    """Appends snapshots to a session CSV.

    Create with :meth:`create`, which opens the file before any sampling starts, so an
    unwritable path fails early (and leaves no file). Every ``write_*`` flushes.
    A failure raises :class:`SessionWriteError`; everything flushed before stays on disk.
    """

    def __init__(self, fh: IO[str], path: str, host: str, session_id: str | None = None,
                 file: NewFile | None = None):
        self.fh = fh
        self.path = path
        self.host = host
        self.session_id = session_id or new_session_id()
        self.file = file  # set when this run created the file (it may remove it again)
        self._fd = fh.fileno()  # kept for truncating after a failed write
        self._csv = csv.writer(fh, lineterminator="\n")
        self._buf = io.StringIO()  # the tick's rows, written at once by _flush
        self._buf_bytes = 0  # their size in UTF-8, counted as each row is checked
        self._line = io.StringIO()  # one row, checked before it joins the tick's rows
        self._linecsv = csv.writer(self._line, lineterminator="\n")
        self.refused_rows = 0  # rows refused for their content (see the module docstring)
        self.closed = False
        self.good_bytes = 0  # the file's size after the last complete write
        self._described: dict[str, Domain] = {}  # domain rows written, by id
        self._device_read: dict[str, float] = {}  # the device reading written, by domain id
        self._carbon: CarbonInfo | None = None  # the carbon settings in force in the file

    @classmethod
    def create(cls, path: str | os.PathLike, host: str, *, overwrite: bool = False,
               append: bool = False, session_id: str | None = None) -> "SessionWriter":
        """Open ``path`` for a new session and write the header.

        Refuses to replace a non-empty file unless ``overwrite`` (a previous session is
        worth more than a typo). With ``append``, a non-empty file that is a session CSV
        gets this session after its rows (one header; readers tell sessions apart by the
        ``session`` column); any other file is refused. Only regular files are written
        and no link is followed (see :mod:`.files`): a file that is replaced keeps its
        old contents until the first row after the header is written (or :meth:`discard`
        drops the new one). Raises OSError (with a readable message) on failure.
        """
        path = os.fspath(path)
        st = files.check_target(path)
        if append and st is not None and st.st_size > 0:
            return cls._append_to(path, host, session_id)
        return cls.open_new(files.create_target(path, overwrite=overwrite), host, session_id)

    @classmethod
    def open_new(cls, new: NewFile, host: str, session_id: str | None = None) -> "SessionWriter":
        """A writer over a file this run has just created; writes the header. A header
        that cannot be written removes the file (it is ours) and raises SessionWriteError."""
        fh = _fdopen(new.fd, "w")
        w = cls(fh, new.path, host, session_id, file=new)
        try:
            w._csv.writerow(COLUMNS)
            fh.flush()
        except OSError as exc:  # no empty or half-written file is left behind
            w.discard()
            raise SessionWriteError(f"cannot write {new.path}: {exc.strerror or exc}") from exc
        w.good_bytes = fh.tell()
        return w

    @classmethod
    def _append_to(cls, path: str, host: str, session_id: str | None) -> "SessionWriter":
        header = ",".join(COLUMNS).encode()
        fd = files.open_existing(path)
        try:
            first = os.pread(fd, len(header) + 8, 0).split(b"\n")[0].rstrip(b"\r")
            size = os.fstat(fd).st_size
            ends_nl = os.pread(fd, 1, size - 1) == b"\n"
        except OSError:
            os.close(fd)
            raise
        if first.removeprefix(b"\xef\xbb\xbf") != header:
            os.close(fd)
            raise FileExistsError(f"{path} is not a tuimeter session: not appended to")
        fh = _fdopen(fd, "a")
        w = cls(fh, path, host, session_id)
        w.good_bytes = size
        if not ends_nl:  # a killed recorder's cut-off row stays one bad line, not two
            try:
                fh.write("\n")
                fh.flush()
            except OSError as exc:
                w._abandon(w.good_bytes)
                raise SessionWriteError(f"cannot write {path}: {exc.strerror or exc}") from exc
            w.good_bytes += 1
        return w

    def commit(self) -> None:
        """A file that replaces another gets its name now (done by the first row after the
        header, and by close). Raises SessionWriteError."""
        if self.file is not None and self.file.pending:
            try:
                self.file.commit()
            except OSError as exc:
                raise SessionWriteError(
                    f"cannot write {self.path}: {getattr(exc, 'strerror', None) or exc}") from exc

    def discard(self) -> None:
        """A start that failed: close, and remove the file if this run created it (a file
        it was to replace stays as it was)."""
        self.closed = True
        if self.file is not None:  # while our descriptor holds the inode (see NewFile.remove)
            self.file.remove()
        try:
            self.fh.close()
        except (OSError, ValueError):
            pass

    # -- rows ---------------------------------------------------------------------
    def _row(self, ts: float, elapsed: float, interval: float, kind: str, domain: str = "",
             source: str = "", in_total: bool | None = None, power_w: float | None = None,
             energy_j: float | None = None, co2_g: float | None = None, provenance: str = "",
             label: str = "", pid: int | None = None) -> None:
        self._put(Row(0, ts, elapsed, interval, self.host, self.session_id, kind, domain,
                      source, in_total, power_w, energy_j, co2_g, provenance, label, pid))

    def _put(self, row: Row) -> None:
        """Render ``row`` (:func:`~.schema.render`) into the tick's rows, or refuse it."""
        try:
            fields = render(row)
        except (ValueError, TypeError, OverflowError) as exc:
            self._refuse(row.wall_s, row.elapsed_s, row.kind, row.source, row.label, exc)
            return
        if not self._add_line(fields):
            self._refuse(row.wall_s, row.elapsed_s, row.kind, row.source, row.label,
                         UnicodeError("not valid UTF-8"))

    def _add_line(self, fields: tuple) -> bool:
        """Render one row; add it to the tick's rows if it can be written as UTF-8."""
        self._line.seek(0)
        self._line.truncate()
        try:
            self._linecsv.writerow(fields)
            text = self._line.getvalue()
            size = len(text.encode("utf-8"))
        except (UnicodeError, csv.Error):
            return False
        self._buf.write(text)
        self._buf_bytes += size
        return True

    def _refuse(self, ts, elapsed, kind: str, source, label, exc: Exception) -> None:
        """Write an ``event`` row instead of a row that cannot be written (the label is
        shown with its undecodable characters escaped); never raises."""
        self.refused_rows += 1
        shown = (label if isinstance(label, str) else repr(label))[:200]
        shown = shown.encode("utf-8", "backslashreplace").decode("utf-8")
        reason = "not valid UTF-8" if isinstance(exc, UnicodeError) else type(exc).__name__
        log.warning("%s: a %s row was not written (%s)", self.path, kind, reason)
        when = ts if isinstance(ts, (int, float)) and ts == ts and abs(ts) < 1e11 else 0.0
        since = elapsed if isinstance(elapsed, (int, float)) else None
        self._add_line(render(Row(0, when, since, 0.0, self.host, self.session_id, EVENT, "",
                                  source if isinstance(source, str) else "", None, None, None,
                                  None, "", f"refused: {kind} row not written ({reason}): "
                                  f"{shown}", None)))

    def _flush(self) -> None:
        data, size = self._buf.getvalue(), self._buf_bytes
        self._buf.seek(0)
        self._buf.truncate()
        self._buf_bytes = 0
        if not data:
            return
        self.commit()
        try:
            self.fh.write(data)
            self.fh.flush()
        except (OSError, ValueError) as exc:
            # disk full mid-row: cut the file back to the last complete tick, so it ends
            # on a whole row and holds exactly what the recorder reports as written
            self._abandon(self.good_bytes)
            raise SessionWriteError(
                f"cannot write {self.path}: {getattr(exc, 'strerror', None) or exc}") from exc
        self.good_bytes += size

    def _abandon(self, size: int) -> None:
        """After a failed write: close without writing more, truncate to ``size``."""
        self.closed = True
        try:  # truncated through our own descriptor: the name may point elsewhere by now
            fd = os.dup(self._fd)
        except OSError:
            fd = -1
        try:
            self.fh.close()  # may try (and fail) to flush the rest: truncated below
        except (OSError, ValueError):
            pass
        if fd >= 0:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            os.close(fd)

    def write_header_info(self, snap: Snapshot, details: str = "") -> None:
        """The rows that describe the session: ``session`` (human text: schema, carbon
        settings, sensor statuses), ``settings`` (schema and carbon settings, JSON) and a
        ``domain`` row per domain (see :mod:`.schema`)."""
        self._row(snap.timestamp, snap.elapsed_s, 0.0, SESSION,
                  label=schema.session_label(snap, details))
        self._row(snap.timestamp, snap.elapsed_s, 0.0, SETTINGS,
                  label=schema.settings_label(snap.carbon, snap.tags))
        self._carbon = snap.carbon
        self._domain_rows(snap)
        self._flush()

    def _domain_rows(self, snap: Snapshot) -> None:
        """A ``domain`` row for each domain not yet described in this file, or whose
        description changed (a sensor rediscovered): before its first sample row."""
        for d in snap.domains:
            dom = d.domain
            known = self._described.get(dom.id)
            if known is not dom and known != dom:  # (the same object tick after tick)
                self._described[dom.id] = dom
                self._put(schema.domain_row(dom, snap.timestamp, snap.elapsed_s, self.host,
                                            self.session_id))

    def write_snapshot(self, snap: Snapshot) -> None:
        """All rows of one tick, then flush: markers, events, a ``carbon`` row when the
        carbon settings changed since the file's last, domain rows, samples."""
        work = list(snap.new_work)  # in the order they came, among the markers
        for i, m in enumerate(snap.new_markers):
            while work and work[0].after_markers <= i:
                self._work_rows(work.pop(0))
            self._row(m.timestamp, m.elapsed_s, 0.0, MARKER, source=m.source, label=m.label,
                      pid=m.pid)
        for w in work:
            self._work_rows(w)
        for e in snap.events:
            self._row(snap.timestamp, snap.elapsed_s, 0.0, EVENT, domain=e.domain_id,
                      source=e.source, label=f"{e.kind}: {e.message}")
        if snap.interval_s > 0:
            if snap.carbon != self._carbon:  # a live source's new figure (schema 3)
                self._carbon = snap.carbon
                self._put(schema.carbon_row(snap.carbon, snap.timestamp, snap.elapsed_s,
                                            self.host, self.session_id))
            self._domain_rows(snap)
            self._point_rows(snap)
            self._device_rows(snap)
        self._flush()

    def _work_rows(self, work) -> None:
        for row in schema.work_rows(work, self.host, self.session_id):
            self._put(row)

    def _device_rows(self, snap: Snapshot) -> None:
        """A ``device`` row per domain whose device readings are new since the file's last
        (they are read every few seconds, so at most one row per read, not one per tick)
        and hold a utilisation (GPUs: a CPU package's frequency and temperature alone, which
        no reader needs, would add a row every 2 s per package), and the machine's CPU load
        of the tick (domain ``total``) where attribution gave one."""
        ts, el, iv = snap.timestamp, snap.elapsed_s, snap.interval_s
        for d in snap.domains:
            info = d.device
            if info is None or info.util_pct is None \
                    or self._device_read.get(d.domain.id) == info.t_s:
                continue
            self._device_read[d.domain.id] = info.t_s
            readings = {k: getattr(info, k) for k in schema.DEVICE_READINGS
                        if getattr(info, k, None) is not None}
            if readings:
                self._put(schema.device_row(d.domain.id, d.domain.source, readings, ts, el, iv,
                                            self.host, self.session_id))
        if snap.cpu_busy_ratio is not None:
            self._put(schema.device_row("total", "attribution",
                                        {"util_pct": 100.0 * snap.cpu_busy_ratio}, ts, el, iv,
                                        self.host, self.session_id))

    def _point_rows(self, snap: Snapshot) -> None:
        """The tick's derived rows, rendered from :func:`~tuimeter.points.points`: a
        ``sample`` row per domain (provenance ``lost`` when it was not read), ``total``,
        ``job`` (domain all, cpu, gpu: the followed process tree), ``tree`` rows (domain
        all: each owner tree, a marking process's or a rank's), ``process`` rows
        (domain all: the top processes, then ``idle/system`` and ``other processes`` with
        an empty pid, so that the process rows of a tick add up to its total; source ``job``
        for a process of the followed job, so that a replay shows the job's own; at a full
        scan of the two-tier scan, domain ``settled``: a process's part of the window's
        ``other processes``, docs/scan.md) and
        ``cgroup`` rows (domain all, label the cgroup path: the top cgroups, ``other
        cgroups``, ``idle/system``; they add up to the total too). The points' tags and
        fields are typed (a pid an int, in_total a bool): nothing is parsed back; the
        job's CPU and GPU rows take the tick's grams per joule from the snapshot, not
        from the ``grid`` point, so the order of the points does not matter."""
        ts, el, iv = snap.timestamp, snap.elapsed_s, snap.interval_s
        factor = snap.carbon.g_per_j
        in_job = {p.pid for p in snap.processes if p.in_job}
        for p in points(snap):
            t, f = p.tags, p.fields
            if p.name == "domain":
                prov = t["provenance"] if f["up"] else LOST
                if f["estimated_s"]:  # part of its energy estimates a span lost to a reset
                    prov = schema.INTERPOLATED
                # bridged across the lost intervals before it: over how long; lost: why
                label = schema.sample_label(f["note"], f["bridged_s"], f["estimated_s"])
                self._row(ts, el, iv, SAMPLE, t["domain"], t["source"], t["in_total"],
                          f["power_w"], f["energy_j"], f["co2_g"], prov, label)
            elif p.name == "machine":
                self._row(ts, el, iv, TOTAL, "total", "", None, f["power_w"], f["energy_j"],
                          f["co2_g"], t["provenance"],
                          schema.total_label(f["lost"], f["bridged"], f["note"]))
            elif p.name == "job":
                pid = t["pid"]
                self._row(ts, el, iv, JOB, "all", "attribution", None, f["power_w"],
                          f["energy_j"], f["co2_g"], t["provenance"], t["name"], pid)
                for dom in ("cpu", "gpu"):
                    w = f[f"{dom}_power_w"]
                    self._row(ts, el, iv, JOB, dom, "attribution", None, w, w * iv,
                              w * iv * factor, t["provenance"], t["name"], pid)
            elif p.name == "owner":
                self._row(ts, el, iv, TREE, "all", "attribution", None, f["power_w"],
                          f["energy_j"], f["co2_g"], t["provenance"],
                          tree_label(t["name"], t["rank"], f["in_job"]), t["pid"])
            elif p.name in ("process", "settled"):
                source = JOB if p.name == "process" and t["pid"] in in_job else "attribution"
                self._row(ts, el, iv, PROCESS, "all" if p.name == "process" else SETTLED,
                          source, None, f["power_w"], f["energy_j"], f["co2_g"],
                          t["provenance"], t["name"], t["pid"])
            elif p.name == "cgroup":
                self._row(ts, el, iv, CGROUP, "all", "attribution", None, f["power_w"],
                          f["energy_j"], f["co2_g"], t["provenance"], t["cgroup"])

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.commit()
        except SessionWriteError:
            pass
        self.closed = True
        try:
            self.fh.close()
        except OSError:
            pass
