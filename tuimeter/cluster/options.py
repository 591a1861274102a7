"""Every option of the node side (``record --host/--tag``) and of ``tuimeter cluster``,
declared once: name, type, default, environment variable, config key and check.

:data:`OPTIONS` is the one list (:mod:`tuimeter.config` makes a config key of each entry
that has one; the parsers take their flags from it). A leaf module: it imports nothing of
tuimeter but the declaration of a key (:mod:`tuimeter.keys`), so the settings resolver
can read it without a cycle.

Secrets never travel on the command line (other users see it in ``ps``): the bearer token
and the basic-auth user and password come from the environment only
(:data:`TOKEN_ENV`, :data:`USER_ENV`, :data:`PASSWORD_ENV`), never from config.toml.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..keys import Key

#: a host name as every row and series carries it: the domain ids are ``NODE/DOMAIN``, so
#: no ``/``; no spaces or control characters (it is shown and used as a label value)
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
#: a tag key is a Prometheus label name (and an InfluxDB tag key); ``__`` is reserved
_TAG_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
#: label names tuimeter's own series already use (a tag may not replace one), and the
#: ones Prometheus gives every scraped series or uses itself
RESERVED_TAGS = frozenset({
    "host", "domain", "kind", "source", "provenance", "in_total", "pid", "name", "rank",
    "cgroup", "container", "pod", "carbon_source", "pue", "label", "marker", "version",
    "schema", "interval_s", "slurm_job", "slurm_step", "instance", "le", "quantile",
})
MAX_TAGS = 16
MAX_TAG_VALUE = 128
#: the sources ``tuimeter cluster`` can read (``--source``)
SOURCES = ("tuimeter", "dcgm", "kepler")
TOKEN_ENV = "TUIMETER_CLUSTER_TOKEN"
USER_ENV = "TUIMETER_CLUSTER_USER"
PASSWORD_ENV = "TUIMETER_CLUSTER_PASSWORD"

Tags = tuple[tuple[str, str], ...]


def check_host(value: object) -> str:
    """A node name: letters, digits, ``.``, ``_``, ``-``, at most 253; ValueError else."""
    if not isinstance(value, str) or not _HOST.match(value.strip()):
        raise ValueError(f"a host name is letters, digits, '.', '_' and '-' (at most 253, "
                         f"no '/'), got {str(value)[:40]!r}")
    return value.strip()


def check_tag(key: object, value: object) -> tuple[str, str]:
    """One ``KEY=VALUE`` tag, checked: the key a label name not ours, the value printable
    text of 1..128 characters."""
    if not isinstance(key, str) or not _TAG_KEY.match(key) or key.startswith("__"):
        raise ValueError(f"tag key {str(key)[:40]!r}: letters, digits and '_', not starting "
                         "with a digit or '__', at most 63")
    if key in RESERVED_TAGS:
        raise ValueError(f"tag key {key!r} is a label tuimeter or Prometheus sets itself")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"tag {key}: the value must be text, got {value!r}")
    text = str(value).strip()
    if not text or len(text) > MAX_TAG_VALUE or not text.isprintable():
        raise ValueError(f"tag {key}: the value must be 1..{MAX_TAG_VALUE} printable "
                         f"characters, got {text[:40]!r}")
    return key, text


def parse_tag(text: str) -> tuple[str, str]:
    """``"job=exp1"`` -> ("job", "exp1"); ValueError for anything else."""
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"expected KEY=VALUE, got {text[:40]!r}")
    return check_tag(key.strip(), value)


def check_tags(value: object) -> Tags:
    """Tags from the environment (``"job=exp1,partition=gpu"``), config.toml (a table
    ``{job = "exp1"}`` or a list of ``"KEY=VALUE"``) or the command line's list; each key
    once, at most :data:`MAX_TAGS`."""
    if isinstance(value, str):
        pairs = [parse_tag(p) for p in value.split(",") if p.strip()]
    elif isinstance(value, dict):
        pairs = [check_tag(k, v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        pairs = [p if isinstance(p, tuple) else parse_tag(str(p)) for p in value]
    else:
        raise ValueError(f"tags must be KEY=VALUE text or a table, got {value!r}")
    seen: dict[str, str] = {}
    for k, v in pairs:
        if k in seen and seen[k] != v:
            raise ValueError(f"tag {k!r} given twice ({seen[k]!r} and {v!r})")
        seen[k] = v
    if len(seen) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags, got {len(seen)}")
    return tuple(seen.items())


def check_url(value: object) -> str:
    """A Prometheus API base URL: http(s)://HOST[:PORT][/PATH] (Thanos, Mimir and
    VictoriaMetrics serve the same API, often under a path prefix)."""
    text = str(value).strip() if isinstance(value, str) else ""
    if not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", text):
        raise ValueError(f"expected http://HOST:PORT or https://..., got {str(value)[:60]!r}")
    if re.match(r"^https?://[^/]*@", text):
        raise ValueError("put no user or password in the URL (everyone can read a command "
                         f"line): set {USER_ENV} and {PASSWORD_ENV}")
    return text.rstrip("/")


def check_selector(value: object) -> Tags:
    """``KEY=VALUE,...`` label matchers (exact match; keys are label names)."""
    if isinstance(value, dict):
        value = ",".join(f"{k}={v}" for k, v in value.items())
    if not isinstance(value, str):
        raise ValueError(f"expected KEY=VALUE,..., got {value!r}")
    out = []
    for part in (p for p in value.split(",") if p.strip()):
        key, sep, val = part.partition("=")
        key = key.strip()
        if not sep or not _TAG_KEY.match(key) or not val.strip() or not val.isprintable():
            raise ValueError(f"selector {part[:40]!r}: expected KEY=VALUE")
        out.append((key, val.strip()))
    return tuple(out)


def check_nodes(value: object) -> tuple[str, ...]:
    """``A,B,...``: node names (each checked as a host name)."""
    parts = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    nodes = tuple(dict.fromkeys(check_host(p) for p in parts if str(p).strip()))
    if not nodes:
        raise ValueError("no node names given")
    return nodes


def check_slurm_job(value: object) -> str:
    """A SLURM job id: digits, an array task ``123_4`` or a het job ``123+0``."""
    text = str(value).strip()
    if not re.match(r"^[0-9]{1,12}([_+][0-9]{1,8})?$", text):
        raise ValueError(f"a SLURM job id is a number (123, 123_4), got {text[:40]!r}")
    return text


def check_seconds(value: object) -> float:
    """A finite number of seconds > 0 and at most a day."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number of seconds, got {value!r}")
    try:
        s = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"must be a number of seconds, got {value!r}") from None
    if not math.isfinite(s) or not 0 < s <= 86400:
        raise ValueError(f"must be > 0 and at most 86400 seconds, got {value!r}")
    return s


def check_file(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a file name, got {value!r}")
    return value


def check_sources(value: object) -> tuple[str, ...]:
    parts = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    out = tuple(dict.fromkeys(str(p).strip() for p in parts if str(p).strip()))
    bad = [p for p in out if p not in SOURCES]
    if bad or not out:
        raise ValueError(f"sources are {', '.join(SOURCES)}; got {','.join(bad) or 'none'}")
    return out


@dataclass(frozen=True)
class Option:
    """One option: ``dest`` (the parsed name), its flag, type (for the docs), default,
    environment variable and config key (None where it has none), check (the same for
    every origin) and help text. ``command`` is ``record`` or ``cluster``."""

    dest: str
    flag: str
    type: str
    default: Any
    env: str | None
    key: str | None
    check: Callable[[object], Any]
    help: str
    command: str
    metavar: str = ""


OPTIONS: tuple[Option, ...] = (
    # -- the node side (tuimeter record) --
    Option("host", "--host", "str", None, "TUIMETER_HOST", "host", check_host,
           "the node's name in every row and series (default: the host name; a "
           "container's is random)", "record", "NAME"),
    Option("tags", "--tag", "list of KEY=VALUE", None, "TUIMETER_TAGS", "tags", check_tags,
           "a label on every exported series and in the session's settings row "
           "(repeatable: --tag job=exp1 --tag partition=gpu)", "record", "KEY=VALUE"),
    # -- tuimeter cluster --
    Option("prometheus_url", "--prometheus-url", "URL", None,
           "TUIMETER_CLUSTER_PROMETHEUS_URL", "cluster_prometheus_url", check_url,
           "the Prometheus (or Thanos, Mimir, VictoriaMetrics) that scrapes the nodes",
           "cluster", "URL"),
    Option("selector", "--selector", "KEY=VALUE,...", None, "TUIMETER_CLUSTER_SELECTOR",
           "cluster_selector", check_selector,
           "only the nodes whose series carry these labels (job=exp1,partition=gpu)",
           "cluster", "KEY=VALUE,..."),
    Option("nodes", "--nodes", "NAME,...", None, None, None, check_nodes,
           "only these nodes", "cluster", "NAME,..."),
    Option("slurm_job", "--slurm-job", "job id", None, None, None, check_slurm_job,
           "only the nodes of this SLURM job (asks squeue/scontrol, or sacct once it "
           "ended)", "cluster", "ID"),
    Option("sources", "--source", "tuimeter,dcgm,kepler", ("tuimeter",),
           "TUIMETER_CLUSTER_SOURCES", "cluster_sources", check_sources,
           "which series to read: tuimeter's own, NVIDIA DCGM exporter's GPU energy, "
           "Kepler's node energy (one source per device: tuimeter's wins)", "cluster",
           "NAME,..."),
    Option("stale_after_s", "--stale-after", "seconds", None, "TUIMETER_CLUSTER_STALE_AFTER",
           "cluster_stale_after_s", check_seconds,
           "a node whose last sample is older is lost (default: 3 of its scrape "
           "intervals, at least 3 s)", "cluster", "S"),
    Option("timeout_s", "--timeout", "seconds", 5.0, "TUIMETER_CLUSTER_TIMEOUT",
           "cluster_timeout_s", check_seconds,
           "how long one query to Prometheus may take (default 5)", "cluster", "S"),
    Option("ca_file", "--ca-file", "file", None, "TUIMETER_CLUSTER_CA_FILE",
           "cluster_ca_file", check_file,
           "CA certificates for an https:// Prometheus (default: the system's)",
           "cluster", "FILE"),
)
BY_DEST = {o.dest: o for o in OPTIONS}


def _doc_default(o: Option) -> str:
    if o.dest == "host":
        return "the host name"
    if o.default is None:
        return "none"
    text = ",".join(o.default) if isinstance(o.default, tuple) else str(o.default)
    return f"`{text}`"


#: the config keys of :data:`OPTIONS` (those that have one), as :mod:`tuimeter.settings`
#: resolves every option: the command line, then the environment, then config.toml
KEYS: tuple[Key, ...] = tuple(
    Key(o.key, o.check, o.env, o.dest, type=o.type, default=_doc_default(o),
        what=("tuimeter cluster: " if o.command == "cluster" else "") + o.help,
        option=f"`{o.flag}`" + (" (record)" if o.command == "record" else ""))
    for o in OPTIONS if o.key)


def _argtype(check: Callable[[Any], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = check.__name__.removeprefix("check_")
    return parse


def add_options(p: argparse.ArgumentParser, command: str) -> None:
    """The options of ``command`` (``record`` or ``cluster``), unset (None) so that the
    environment and config.toml can fill them (tuimeter.settings.from_args)."""
    for o in OPTIONS:
        if o.command != command:
            continue
        if o.dest == "tags":
            p.add_argument(o.flag, dest="tags", action="append", type=_argtype(parse_tag),
                           default=None, metavar=o.metavar, help=o.help)
        else:
            p.add_argument(o.flag, dest=o.dest, type=_argtype(o.check), default=None,
                           metavar=o.metavar, help=o.help)


def resolved(args: argparse.Namespace, dest: str) -> Any:
    """An option's value after the command line, environment and config.toml: the
    declared default where none set it. The command line's ``--tag`` list is checked
    as a whole (each key once)."""
    value = getattr(args, dest, None)
    if value is None:
        return BY_DEST[dest].default
    if dest == "tags" and isinstance(value, list):
        return check_tags(value)
    return value
