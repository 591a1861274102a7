"""The doctor's report as text for a terminal. Strings read from the machine (zone names,
GPU names, the CPU model, file paths) may hold control characters: they are shown escaped."""

from __future__ import annotations

from typing import Any

from tuimeter.text import safe_text


def _s(value: Any) -> str:
    """Text safe to print (:func:`tuimeter.text.safe_text`); ``None`` reads ``N/A``."""
    return "N/A" if value is None else safe_text(value)


def _w(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.2f} W"


def _found(section: dict) -> str:
    if section.get("probe_error"):
        return f"check failed ({_s(section['probe_error'])})"
    if not section.get("found"):
        return "not found" + (f": {_s(section.get('reason'))}" if section.get("reason") else "")
    return "found"


def _period(period_s: float | None) -> str:
    """The counter's measured update period (phases shorter than a few of them are
    ``interpolated``)."""
    if period_s is None:
        return "counter update period: not seen (the counter hardly moved while polled)"
    return f"counter updates every {period_s * 1e3:.3g} ms (measured)"


def _rapl(s: dict, window_s: float) -> list[str]:
    lines = [f"RAPL (powercap at {_s(s.get('root'))}): {_found(s)}"]
    for z in s.get("zones", []):
        unit = "N/A" if z.get("unit_uj") is None else f"{z['unit_uj']:.2f} uJ"
        lines.append(f"  {_s(z['zone'])} {_s(z['name'])} -> {_s(z['domain'])}"
                     f"{'' if z.get('in_total') else ' (inside another, not added)'}")
        lines.append(f"    path {_s(z['path'])}")
        lines.append(f"    range {z['max_energy_range_uj']} uJ ({z['range_j']:.1f} J), "
                     f"unit {unit}; energy_uj: {_s(z['energy_uj_state'])}")
        if z.get("delta_j") is not None:
            lines.append(f"    {z['delta_j']:.3f} J in {window_s:g} s = {_w(z['power_w'])}"
                         f"{' (wrapped once)' if z.get('wrapped') else ''}")
        if "update_period_s" in z:
            lines.append(f"    {_period(z['update_period_s'])}")
    for note in s.get("notes", []):
        lines.append(f"  note: {_s(note)}")
    return lines


def _nvml(s: dict, window_s: float) -> list[str]:
    lines = [f"NVML: {_found(s)}",
             f"  nvidia-ml-py {_s(s.get('nvidia_ml_py_version'))}, driver "
             f"{_s(s.get('driver_version'))}, NVML {_s(s.get('nvml_version'))}"]
    for g in s.get("gpus", []):
        lines.append(f"  gpu{g['index']}: {_s(g['name'])} {_s(g['uuid'])}")
        for f in g.get("fields", []):
            value = "" if f["value"] is None else f" = {f['value']:.3f} {f['unit']}"
            lines.append(f"    field {f['field_id']} {f['name']} (scope {f['scope_id']}): "
                         f"{_s(f['status'])}{value}")
        lines.append(f"    nvmlDeviceGetPowerUsage: {_w(g['power_usage_w'])}")
        energy = "N/A" if g.get("energy_j") is None else f"{g['energy_j']:.3f} J since driver load"
        lines.append(f"    nvmlDeviceGetTotalEnergyConsumption: {energy}")
        if g.get("energy_delta_j") is not None:
            lines.append(f"    {g['energy_delta_j']:.3f} J in {window_s:g} s = "
                         f"{_w(g['power_from_energy_w'])} (instant power now "
                         f"{_w(g['power_instant_w'])})")
        if "update_period_s" in g:
            lines.append(f"    {_period(g['update_period_s'])}")
        pu = g.get("process_utilization") or {}
        lines.append(f"    process utilisation: {_s(pu.get('status'))}")
        lines.append(f"    MIG mode: {_s((g.get('mig_mode') or {}).get('status'))}")
        for err in g.get("errors", []):
            lines.append(f"    error: {_s(err)}")
    return lines


def _powermetrics(s: dict) -> list[str]:
    lines = [f"powermetrics: {_found(s)}"]
    if s.get("found"):
        lines.append(f"  {_s(s.get('path'))}; root: {'yes' if s.get('root') else 'no'}; "
                     f"sudoers NOPASSWD: {'yes' if s.get('sudoers') else 'no'}")
    return lines


def _estimate(s: dict) -> list[str]:
    if s.get("probe_error"):
        return [f"estimate: {_found(s)}"]
    use = {True: "in use (nothing measures the CPU)", False: "not needed (the CPU is measured)",
           None: "N/A"}[s.get("in_use")]
    mem = s.get("memory_gib")
    mem_text = "N/A" if mem is None else f"{mem:.1f} GiB x {s['memory_w_per_gib']} W/GiB"
    return [f"estimate: {use}",
            f"  CPU {_s(s.get('cpu_model'))}, {s.get('threads')} threads: "
            f"{_s(s.get('description'))}",
            f"  memory {mem_text}"]


def _carbon(s: dict) -> list[str]:
    if s.get("g_per_kwh") is None:
        return ["carbon: N/A (see problems)"]
    lines = [f"carbon: {s['g_per_kwh']:g} g CO2e/kWh, PUE {s['pue']:g} ({_s(s['source'])})",
             f"  config {_s(s.get('config_path'))}"
             f"{'' if s.get('config_exists') else ' (none)'}"]
    for key, value in (s.get("environment") or {}).items():
        lines.append(f"  {key}={_s(value)}")
    live = s.get("live")
    if live:
        zone = f" {_s(live.get('zone'))}" if live.get("zone") else ""
        answer = live.get("answer") or {}
        said = (f"{answer['g_per_kwh']:g} g/kWh ({_s(answer.get('source'))})"
                if answer.get("g_per_kwh") is not None else "no answer")
        lines.append(f"  live source {_s(live.get('source'))}{zone} at "
                     f"{_s(live.get('url'))}: {said}")
    return lines


def _node(s: dict) -> list[str]:
    """The node meters found (what each reads, its update period, its power over the
    window) and the platform against the chips."""
    found = [m for m in s.get("meters", []) if m.get("found")]
    lines = [f"Node meters: {_found(s) if found or s.get('probe_error') else 'none found'}"]
    for m in found:
        period = m.get("update_period_s")
        lines.append(f"  {_s(m['domain'])} ({_s(m['kind'])}, {_s(m['sensor'])}): {_s(m['reads'])}")
        lines.append(f"    {_w(m.get('power_w'))} over the window"
                     + (f"; updates about every {period:g} s (nominal)" if period else ""))
    a = s.get("agreement")
    if a:
        share = "" if a.get("chips_share") is None else f" ({100 * a['chips_share']:.0f}% of it)"
        lines.append(f"  {_s(a['platform'])} {_w(a['platform_w'])}; chips {_w(a['chips_w'])}"
                     f"{share}; rest of node {_w(a['rest_w'])}")
    return lines


def render_text(report: dict) -> str:
    sensors = report.get("sensors", {})
    window_s = report.get("window_s", 0)
    lines = [f"tuimeter {report.get('tuimeter_version')} doctor on {_s(report.get('host'))} "
             f"({_s(report.get('platform'))}, Python {report.get('python')}), "
             f"{window_s:g} s window", ""]
    if "rapl" in sensors:
        lines += _rapl(sensors["rapl"], window_s)
    if "nvml" in sensors:
        lines += _nvml(sensors["nvml"], window_s)
    if sensors.get("node", {}).get("found") or sensors.get("node", {}).get("probe_error"):
        lines += _node(sensors["node"])
    if "powermetrics" in sensors:
        lines += _powermetrics(sensors["powermetrics"])
    if "estimate" in sensors:
        lines += _estimate(sensors["estimate"])
    if report.get("carbon"):
        lines += _carbon(report["carbon"])
    lines.append("")
    problems = report.get("problems", [])
    if not problems:
        lines.append("No problems: everything found is readable.")
    for p in problems:
        lines.append(f"{p['level'].upper()} {p['sensor']}: {_s(p['what'])}")
        if p.get("fix"):
            lines.append(f"  fix: {_s(p['fix'])}")
    errors = sum(p["level"] == "error" for p in problems)
    lines.append(f"exit status {report.get('exit_code')}: "
                 + (f"{errors} thing(s) found cannot be read" if errors
                    else "everything found is readable"))
    return "\n".join(lines)
