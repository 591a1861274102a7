"""The series ``tuimeter cluster`` reads, source by source, and how each becomes a remote
domain ``NODE/DOMAIN`` (:class:`Spec`), and the PromQL label matchers that select them
(values quoted, node names escaped for ``=~``). Nothing in a series' labels is trusted:
a host or domain that is not printable text, holds a ``/`` (the separator of
``NODE/DOMAIN``) or is too long is no domain at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..model import Domain, DomainKind, Provenance

TUIMETER_METRIC = "tuimeter_energy_joules_total"
DCGM_METRIC = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
#: labels of tuimeter's energy series that are not a node's tags
OWN_LABELS = frozenset({"__name__", "host", "domain", "kind", "source", "provenance",
                        "in_total", "instance"})
KEPLER_ZONES = {"package": DomainKind.PACKAGE, "dram": DomainKind.DRAM,
                "platform": DomainKind.PSYS, "other": DomainKind.OTHER}


def _quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _regex_alternatives(names: Sequence[str]) -> str:
    """``a|b`` for ``=~``, each name's regex characters escaped."""
    out = []
    for n in names:
        out.append("".join("\\" + c if not (c.isalnum() or c in "_-") else c for c in n))
    return "|".join(out)


def matchers(selector: Sequence[tuple[str, str]], nodes: Sequence[str] | None,
             host_label: str = "host") -> str:
    """``{k="v",host=~"a|b"}`` (``""`` when there is nothing to match)."""
    parts = [f"{k}={_quote(v)}" for k, v in selector]
    if nodes:
        parts.append(f"{host_label}=~{_quote(_regex_alternatives(nodes))}")
    return "{" + ",".join(parts) + "}" if parts else ""


@dataclass(frozen=True)
class Spec:
    """How one source's series become remote domains."""

    name: str
    metric: str
    host_label: str
    scale_j: float  # the series' unit, in joules

    def key(self, labels: dict[str, str]) -> tuple[str, str] | None:
        """(node, domain id) of a series, or None to skip it."""
        host = labels.get(self.host_label, "")
        if self.name == "tuimeter":
            dom = labels.get("domain", "")
        elif self.name == "dcgm":
            gpu = labels.get("gpu", "")
            dom = f"gpu{gpu}" if gpu.isdigit() else ""
        else:  # kepler: kepler_node_<zone>_joules_total
            zone = labels.get("__name__", "").removeprefix("kepler_node_")
            zone = zone.removesuffix("_joules_total")
            mode = labels.get("mode", "")
            dom = f"kepler-{zone}" if zone in KEPLER_ZONES and mode in ("", "dynamic",
                                                                         "idle") else ""
            if dom and mode:
                dom += f"-{mode}"
        if (not host or not dom or "/" in host or len(host) > 253 or len(dom) > 200
                or not host.isprintable() or not dom.isprintable()):
            return None  # nothing from outside is trusted: no such node or domain
        return host, dom

    def domain(self, host: str, dom: str, labels: dict[str, str]) -> Domain:
        if self.name == "tuimeter":
            try:
                kind = DomainKind(labels.get("kind", "other"))
            except ValueError:
                kind = DomainKind.OTHER
            try:
                prov = Provenance(labels.get("provenance", "measured"))
            except ValueError:
                prov = Provenance.MEASURED
            in_total = labels.get("in_total") == "1"
            source = labels.get("source", "")
        elif self.name == "dcgm":
            kind, prov, in_total, source = DomainKind.GPU, Provenance.MEASURED, True, "dcgm"
        else:
            zone = dom.removeprefix("kepler-").split("-")[0]
            kind, prov, source = KEPLER_ZONES[zone], Provenance.MEASURED, "kepler"
            in_total = zone in ("package", "dram")
        label = f"{dom} of {host} ({source or self.name} via Prometheus)"
        return Domain(id=f"{host}/{dom}", name=f"{host}/{dom}", kind=kind, source="cluster",
                      provenance=prov, in_total=in_total, label=label[:200])


SPECS = {
    "tuimeter": Spec("tuimeter", TUIMETER_METRIC, "host", 1.0),
    "dcgm": Spec("dcgm", DCGM_METRIC, "Hostname", 1e-3),
    "kepler": Spec("kepler", '{__name__=~"kepler_node_(package|dram|platform|other)_joules_total"}',
                   "instance", 1.0),
}
