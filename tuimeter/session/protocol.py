"""The marker socket's wire format, for both ends: the one place its field names, values
and limits are written. The server (:mod:`.markers`) decodes messages and encodes
replies here; the clients (:mod:`.mark_client`, and :class:`~tuimeter.api.Meter` through
it) encode messages and decode replies here.

A client connects, sends one JSON object on one line (UTF-8, at most
:data:`MAX_MESSAGE_BYTES`), and reads one JSON line back (at most
:data:`MAX_REPLY_BYTES`)::

    {"op": "mark", "label": "epoch 2", "source": "cli", "pid": 4242, "expires": 1.8e9}
    {"op": "status"}
    {"op": "count", "units": {"samples": 64, "tokens": 32768}, "source": "cli", "pid": 4242}
    {"op": "mark", "label": "train", "source": "api", "pid": 4242, "rank": "0",
     "meter": "4242:140:7f3a", "meter_state": "start",
     "session": "3f2a9c0d1e4b", "session_path": "/home/me/run.csv"}

* ``op``: :data:`MARK` (the default), :data:`COUNT` or :data:`STATUS`;
* ``expires``: the client's deadline, seconds since the epoch (a message read after it is
  refused with ``expired``);
* ``session`` / ``session_path``: the session targeted (its id, its CSV's real path);
  without either every session takes it, and another session answers ``other``;
* ``source``: one of :data:`SOURCES` (anything else is taken as ``socket``); ``pid``: the
  process the marker is about (:func:`tuimeter.model.is_pid`);
* ``meter`` (at most :data:`MAX_METER_ID` characters) and ``meter_state`` (one of
  :data:`METER_STATES`): an attached Meter's phases; ``rank``: the rank the process says
  it is.

An accepted message gets the session's state (:func:`session_state`; decoded by
:func:`decode_state` into a :class:`State`); a refused one ``{"ok": false, "error": "..."}``
(:func:`refused`), with ``"other": true`` from a session that is not the target
(:func:`other_session`) or ``"expired": true`` after the deadline (:func:`expired`).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, replace

from ..points import points

#: a message longer than this is refused (a label is short; this is not a data channel).
#: 200 characters of 4-byte UTF-8 plus the other fields fit.
MAX_MESSAGE_BYTES = 4096
#: a reply longer than this is not read (a state holds a few entries per domain)
MAX_REPLY_BYTES = 1 << 20
#: the operations
MARK, COUNT, STATUS = "mark", "count", "status"
#: marker sources a client may claim (the Marker model's vocabulary); the last is what any
#: other claim is taken as
SOURCES = ("cli", "api", "socket")
#: an attached meter's states, and the longest meter id accepted
METER_STATES = ("start", "end")
MAX_METER_ID = 64


class ProtocolError(ValueError):
    """A line that is no message (one line, the refusal's text)."""


# -- messages -------------------------------------------------------------------------
def mark_message(label: str, source: str, pid: int, *, rank: str | None = None,
                 meter: str | None = None, meter_state: str | None = None) -> dict:
    """A ``mark`` (``rank``, ``meter`` and ``meter_state`` only where given)."""
    msg: dict = {"op": MARK, "label": label, "source": source, "pid": pid}
    if rank is not None:
        msg["rank"] = rank
    if meter_state:
        msg.update(meter=meter, meter_state=meter_state)
    return msg


def count_message(units: dict, source: str, pid: int) -> dict:
    """A ``count`` of work: ``units`` is unit -> a positive finite number."""
    return {"op": COUNT, "units": units, "source": source, "pid": pid}


def status_message() -> dict:
    """A ``status``: the state, nothing recorded."""
    return {"op": STATUS}


def encode_message(message: dict, expires: float, target: str | None = None) -> bytes:
    """The line sent: ``message`` with its deadline and (``target``: an id or a path) the
    session it is for, JSON with \\u escapes (any str goes), newline-terminated."""
    message = dict(message, expires=expires)
    if target is not None:
        message.update(session=target, session_path=os.path.realpath(target))
    return json.dumps(message).encode("ascii") + b"\n"


def _number(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


@dataclass(frozen=True)
class Message:
    """A message as the server reads it. ``label``, ``pid`` and ``units`` are as sent
    (the server checks them by the model's rules); the rest is decoded here."""

    op: object
    targeted: bool  # a session or session_path was given (else: every session)
    session: str | None
    session_path: str | None
    expires: float | None
    source: str
    pid: object
    label: object
    units: object
    meter: str | None  # a well-formed meter id, with a known meter_state, else None
    meter_state: str | None
    rank: str | None

    def expired(self, now: float | None = None) -> bool:
        """Read after the client's deadline (it has given up on this session)."""
        return self.expires is not None and (time.time() if now is None else now) > self.expires


def decode_message(line: bytes) -> Message:
    """The message on one line (without its newline); ProtocolError when it is none."""
    try:
        msg = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("not a JSON line") from None
    if not isinstance(msg, dict):
        raise ProtocolError("message must be a JSON object")
    session, path = msg.get("session"), msg.get("session_path")
    meter, state = msg.get("meter"), msg.get("meter_state")
    if not (isinstance(meter, str) and 0 < len(meter) <= MAX_METER_ID
            and state in METER_STATES):
        meter = None
    rank, source = msg.get("rank"), msg.get("source")
    return Message(
        op=msg.get("op", MARK), targeted=session is not None or path is not None,
        session=session if isinstance(session, str) else None,
        session_path=path if isinstance(path, str) else None,
        expires=_number(msg.get("expires")),
        source=source if isinstance(source, str) and source in SOURCES else SOURCES[-1],
        pid=msg.get("pid"), label=msg.get("label"), units=msg.get("units"),
        meter=meter, meter_state=state if state in METER_STATES else None,
        rank=rank if isinstance(rank, str) else None)


# -- replies, the server's end ---------------------------------------------------------
def refused(error: str) -> dict:
    """A refused message's reply."""
    return {"ok": False, "error": error}


def other_session(session_id: str) -> dict:
    """The reply of a session that is not the one targeted (it recorded nothing)."""
    return {"ok": False, "other": True, "session": session_id, "error": "not this session"}


def expired() -> dict:
    """The reply to a message read after its deadline (not recorded)."""
    return {"ok": False, "expired": True, "error": "arrived after the client's deadline"}


def encode_reply(reply: dict) -> bytes:
    return json.dumps(reply).encode() + b"\n"


def session_state(engine, marker=None, session_id: str | None = None,
                  path: str | None = None, owner_pid: int | None = None) -> dict:
    """What an accepted reply carries: the engine's cumulative energy at its last tick.

    ``elapsed_s`` is the marker's instant (or now); ``tick_elapsed_s`` the last tick's.
    A client extrapolates a domain's energy to the marker with its last ``power_w``.
    With ``owner_pid`` (a followed tree's root), ``own`` holds that tree's domains in
    the same form (``provenance`` attributed; none yet before its first tick).
    """
    snap = engine.snapshot
    now_elapsed = marker.elapsed_s if marker is not None else (snap.elapsed_s if snap else 0.0)
    out = {"ok": True, "server": f"{os.getpid()}:{id(engine):x}", "session": session_id,
           "path": path, "host": engine.host,
           "interval_s": engine.interval_s, "elapsed_s": now_elapsed,
           "timestamp": marker.timestamp if marker is not None else time.time()}
    if snap is not None:
        out.update({"tick_seq": snap.seq, "tick_elapsed_s": snap.elapsed_s,
                    "co2_g_per_j": snap.carbon.g_per_j, "total_energy_j": None,
                    "total_power_w": None})
        domains = []
        for p in points(snap):  # the cumulative values, from the one projection
            if p.name == "machine":
                out["total_energy_j"] = p.fields["total_energy_j"]
                out["total_power_w"] = p.fields["power_w"]
            elif p.name == "domain":
                domains.append({"id": p.tags["domain"], "source": p.tags["source"],
                                "in_total": p.tags["in_total"],
                                "provenance": p.tags["provenance"],
                                "total_energy_j": p.fields["total_energy_j"],
                                "total_co2_g": p.fields["total_co2_g"],
                                "power_w": p.fields["power_w"]})
        out["domains"] = domains
        if owner_pid is not None:
            out["own"] = own_state(snap, owner_pid)
    return out


def own_state(snap, pid: int) -> dict:
    """The ``own`` part of a reply: the owner tree rooted at ``pid`` at ``snap``'s tick
    (its ``domains``: id, total_energy_j, power_w), with its ``rank``."""
    for o in snap.owners:
        if o.pid == pid:
            iv = snap.interval_s
            return {"rank": o.rank, "provenance": str(o.provenance),
                    "domains": [{"id": d.id, "total_energy_j": d.total_energy_j,
                                 "power_w": d.energy_j / iv if iv > 0 else 0.0}
                                for d in o.domains]}
    return {"rank": None, "provenance": "attributed", "domains": []}


# -- replies, the client's end ---------------------------------------------------------
def decode_reply(data: bytes) -> dict | None:
    """The reply in what a session sent (its first line), or None when that is no JSON
    object."""
    try:
        reply = json.loads(data.split(b"\n", 1)[0].decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        return None
    return reply if isinstance(reply, dict) else None


def accepted(reply: dict | None) -> bool:
    """The session took the message."""
    return bool(reply and reply.get("ok"))


def is_other(reply: dict | None) -> bool:
    """The reply of a session that is not the one targeted."""
    return bool(reply and reply.get("other"))


def error_of(reply: dict | None) -> str:
    """Why a session refused a message ("" when it did not say)."""
    return str((reply or {}).get("error", ""))


def session_of(reply: dict | None) -> str:
    """The id of the session that answered ("?" when it did not say)."""
    return str((reply or {}).get("session") or "?")


@dataclass(frozen=True)
class DomainState:
    """One domain of a :class:`State`: cumulative energy at the session's last tick and
    the power to extrapolate it with; ``total_co2_g`` None where the reply has none (a
    tree's own domains, an older session)."""

    id: str
    in_total: bool
    provenance: str
    total_energy_j: float
    power_w: float | None
    source: str = ""
    total_co2_g: float | None = None


@dataclass(frozen=True)
class State:
    """An accepted reply, decoded (:func:`decode_state`). ``domains`` None: the session had
    no tick yet; ``own`` None: it follows no tree of the asker (or attributes nothing);
    ``extrapolated``: made up by the client from the last one (the session vanished)."""

    server: str | None
    host: str | None
    elapsed_s: float
    tick_seq: int
    tick_elapsed_s: float | None
    g_per_j: float
    domains: tuple[DomainState, ...] | None
    own: tuple[DomainState, ...] | None
    extrapolated: bool = False

    def at(self, elapsed_s: float) -> "State":
        """The state the session would have given at ``elapsed_s`` (extrapolated)."""
        return replace(self, elapsed_s=elapsed_s, extrapolated=True)

    def _past_tick_s(self) -> float:
        tick = self.elapsed_s if self.tick_elapsed_s is None else self.tick_elapsed_s
        return max(0.0, self.elapsed_s - tick)

    def energy_at_marker(self, domains) -> dict[str, float]:
        """Per domain, the cumulative energy at the marker: at the last tick plus its
        last power over the time since."""
        dt = self._past_tick_s()
        return {d.id: d.total_energy_j + (d.power_w or 0.0) * dt for d in domains}

    def co2_at_marker(self, domains) -> dict[str, float] | None:
        """Per domain, the cumulative CO2e at the marker (as :meth:`energy_at_marker`, at
        the reply's g/J past the last tick); None where a domain has none."""
        if any(d.total_co2_g is None for d in domains):
            return None
        dt = self._past_tick_s()
        return {d.id: d.total_co2_g + (d.power_w or 0.0) * dt * self.g_per_j
                for d in domains}


def _finite(x) -> float | None:
    v = _number(x)
    return v if v is not None and math.isfinite(v) else None


def _domain(obj, in_total=None, provenance=None) -> DomainState | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
        return None
    total = _finite(obj.get("total_energy_j"))
    power = obj.get("power_w")
    if total is None or (power is not None and _finite(power) is None):
        return None
    in_total = obj.get("in_total") if in_total is None else in_total
    provenance = obj.get("provenance") if provenance is None else provenance
    if not isinstance(in_total, bool) or not isinstance(provenance, str):
        return None
    source = obj.get("source")
    return DomainState(obj["id"], in_total, provenance, total,
                       None if power is None else float(power),
                       source if isinstance(source, str) else "",
                       _finite(obj.get("total_co2_g")))


def _domains(items, **kw) -> tuple[DomainState, ...] | None:
    """The entries, or None when any is malformed (a state is read whole or not at all)."""
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        d = _domain(item, **kw)
        if d is None:
            return None
        out.append(d)
    return tuple(out)


def decode_state(reply: dict | None) -> State | None:
    """An accepted reply as a :class:`State`; None for a refusal or a reply that does not
    read as one (a value of the wrong type: nothing from another process is trusted)."""
    if reply is None or not accepted(reply):
        return None
    elapsed = _finite(reply.get("elapsed_s"))
    if elapsed is None:
        return None
    domains = own = None
    if "domains" in reply:
        domains = _domains(reply["domains"])
        if domains is None:
            return None
        seq = reply.get("tick_seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            return None
        own_obj = reply.get("own")
        if isinstance(own_obj, dict) and isinstance(own_obj.get("domains"), list):
            prov = own_obj.get("provenance")
            own = _domains(own_obj["domains"], in_total=True,
                           provenance=prov if isinstance(prov, str) and prov else "attributed")
    server, host = reply.get("server"), reply.get("host")
    seq = reply.get("tick_seq")
    return State(server=server if isinstance(server, str) else None,
                 host=host if isinstance(host, str) else None, elapsed_s=elapsed,
                 tick_seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else 0,
                 tick_elapsed_s=_finite(reply.get("tick_elapsed_s")),
                 g_per_j=_finite(reply.get("co2_g_per_j")) or 0.0,
                 domains=domains, own=own)
