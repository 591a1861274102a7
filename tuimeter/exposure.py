"""One-line warnings, at start, about settings that expose something beyond this machine
or this user: a token sent over plain ``http://`` to another host, a ``config.toml`` that
holds a token and that other users can read, a Prometheus endpoint on every interface.

None of these is refused: each can be what the user wants (a lab network, a shared read-only
config, a scraper on another node); each is said once, as an :class:`ExposureWarning`,
which the command line prints as one ``tuimeter: warning:`` line. A leaf: imports nothing
of tuimeter's.
"""

from __future__ import annotations

import ipaddress
import os
import stat
import urllib.parse
import warnings

#: the hosts that never leave the machine
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
#: the addresses a listener binds to serve every interface
ALL_INTERFACES = {"", "0.0.0.0", "::", "[::]", "*"}

_said: set[tuple[str, str]] = set()


class ExposureWarning(UserWarning):
    """A setting sends a secret, or serves data, beyond this machine or this user."""


def _once(key: tuple[str, str], message: str) -> None:
    if key not in _said:
        _said.add(key)
        warnings.warn(message, ExposureWarning, stacklevel=3)


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_secret_over_http(url: str, what: str) -> bool:
    """Warn when ``what`` (a token, a password) would go to ``url`` in clear text: plain
    ``http://`` to a host other than loopback. True when it warned (or had warned)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "http" or is_loopback(parts.hostname):
        return False
    host = parts.hostname or "?"
    _once((what, host), f"{what} is sent in clear text over plain http:// to {host}: "
                        f"anyone on the network path can read it (use https://)")
    return True


def warn_readable_secret_file(path: str | os.PathLike, keys: list[str]) -> bool:
    """Warn when config file ``path``, which holds ``keys`` (tokens), can be read by
    other users (group or others read permission). True when it warned."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if not mode & (stat.S_IRGRP | stat.S_IROTH):
        return False
    who = "other users" if mode & stat.S_IROTH else "its group"
    _once(("file", os.fspath(path)),
          f"{path} holds {', '.join(keys)} and {who} can read it "
          f"(mode {stat.S_IMODE(mode):04o}): chmod 600 {path}")
    return True


def warn_all_interfaces(host: str, port: int, what: str) -> bool:
    """Warn when listener ``what`` binds ``host`` (every interface). True when it warned."""
    if host not in ALL_INTERFACES:
        return False
    shown = f"[{host}]" if ":" in host else (host or "*")
    _once((what, f"{host}:{port}"),
          f"{what} listens on every interface ({shown}:{port}): any host that can reach "
          f"this machine can read it (give 127.0.0.1:{port}, or a firewall, to keep it local)")
    return True
