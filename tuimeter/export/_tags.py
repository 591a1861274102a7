"""A point's tag as the text an exporter's series carries (a Prometheus label value, an
InfluxDB tag value): both exporters write one tag the same way, so a dashboard over either
filters with the same strings (``in_total="1"``, ``pue="1.2"``, ``pid="4242"``).

The points keep their tags typed (:mod:`tuimeter.points`); this is the exporters' one
rendering of them. Escaping is each format's own (InfluxDB's in ``influx.line``,
Prometheus's in ``prometheus_client``).
"""

from __future__ import annotations


def tag_text(value: object) -> str:
    """``True``/``False`` -> ``"1"``/``"0"`` (a flag, as Prometheus writes them), None ->
    ``""`` (no value: InfluxDB leaves such a tag out), a float in its shortest form
    (``1.2``, ``1``), an int in decimal, a str as it is."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
