"""Writes the recorded-style powermetrics streams in this folder (run it from anywhere).

The files are committed; this script only says how they were made. Each document is
written as powermetrics writes it (XML declaration, Apple DOCTYPE, tab indentation), and a
NUL byte comes *before* each later document, never after the last. Values of the Apple
Silicon samples are the real ones quoted in ../shared/SENSORS.md section 3 (Mac16,5 and an
idle M1); cluster details and the Intel sample's numbers are made up in the shape
SENSORS.md gives, since no real Intel sample was recorded.

    python tests/data/powermetrics/generate.py
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" '
    '"http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
    '<plist version="1.0">\n<dict>\n'
)
TAIL = "</dict>\n</plist>\n"


def value(v: object) -> str:
    if isinstance(v, bool):
        return "<true/>" if v else "<false/>"
    if isinstance(v, int):
        return f"<integer>{v}</integer>"
    if isinstance(v, float):
        return f"<real>{v}</real>"
    if isinstance(v, dict):
        return "<dict>\n" + "".join(f"<key>{k}</key>{value(x)}\n" for k, x in v.items()) + "</dict>"
    if isinstance(v, list):
        return "<array>\n" + "".join(value(x) + "\n" for x in v) + "</array>"
    if isinstance(v, tuple) and v[0] == "date":
        return f"<date>{v[1]}</date>"
    if isinstance(v, tuple) and v[0] == "raw":  # pre-built XML, written as is
        return v[1]
    return f"<string>{v}</string>"  # NOT escaped: powermetrics writes task names raw


def document(top: dict) -> str:
    return HEAD + "".join(f"<key>{k}</key>{value(v)}\n" for k, v in top.items()) + TAIL


def cluster(name: str, freq_hz: float, idle: float, cpus: list[int]) -> dict:
    return {
        "name": name,
        "freq_hz": freq_hz,
        "dvfm_states": [{"freq": 1020, "used_ns": 400000000, "used_ratio": 0.39}],
        "idle_ns": int(idle * 1e9),
        "idle_ratio": idle,
        "down_ratio": 0.0,
        "cpus": [{"cpu": c, "freq_hz": freq_hz, "idle_ns": int(idle * 1e9), "idle_ratio": idle} for c in cpus],
    }


def header(elapsed_ns: int, hw_model: str, osversion: str, stamp: str) -> dict:
    """The top-level keys every sample starts with."""
    return {
        "is_delta": True,
        "elapsed_ns": elapsed_ns,
        "hw_model": hw_model,
        "kern_osversion": osversion,
        "timestamp": ("date", stamp),
        "thermal_pressure": "Nominal",
    }


def apple_energy(cpu_mj: int, cpu_mw: float, gpu_mj: int, gpu_mw: float, combined_mw: float) -> dict:
    """processor.* energy (mJ in the sample) and power (mW) keys of Apple Silicon."""
    return {
        "cpu_energy": cpu_mj,
        "cpu_power": cpu_mw,
        "gpu_energy": gpu_mj,
        "gpu_power": gpu_mw,
        "ane_energy": 0,
        "ane_power": 0.0,
        "combined_power": combined_mw,
    }


def apple_m4(elapsed_ns=1023685416, cpu_mj=3049, cpu_mw=2978.45, gpu_mj=276, gpu_mw=269.614,
             combined_mw=3248.07, gpu_dict_mj=284, stamp="2025-12-18T09:41:07Z", extra=None) -> dict:
    top = header(elapsed_ns, "Mac16,5", "25C56", stamp)
    top.update({
        "processor": {
            "clusters": [
                cluster("E-Cluster", 1260000000.0, 0.81, [0, 1, 2, 3]),
                cluster("P0-Cluster", 2964000000.0, 0.93, [4, 5, 6, 7, 8, 9]),
                cluster("P1-Cluster", 1128000000.0, 0.99, [10, 11, 12, 13, 14, 15]),
            ],
            **apple_energy(cpu_mj, cpu_mw, gpu_mj, gpu_mw, combined_mw),
        },
        "gpu": {
            "freq_hz": 338.0,  # MHz in fact
            "idle_ns": 985000000,
            "idle_ratio": 0.962,
            "dvfm_states": [{"freq": 338, "used_ns": 38000000, "used_ratio": 0.038}],
            "gpu_energy": gpu_dict_mj,
        },
    })
    top.update(extra or {})
    return top


def idle_m1() -> dict:
    top = header(2019178750, "MacBookPro17,1", "22G120", "2023-10-02T18:12:44Z")
    top["processor"] = {
        "clusters": [
            cluster("E-Cluster", 972000000.0, 0.97, [0, 1, 2, 3]),
            cluster("P-Cluster", 600000000.0, 0.99, [4, 5, 6, 7]),
        ],
        **apple_energy(89, 44.0773, 31, 15.3528, 59.4301),
    }
    top["gpu"] = {"freq_hz": 389.0, "idle_ns": 2000000000, "idle_ratio": 0.99, "gpu_energy": 31}
    return top


def intel_mac(package_j=4.52, cpu_j=3.1, igpu_w=0.35, package_w=4.5) -> dict:
    top = header(1004512334, "MacBookPro16,1", "21G115", "2023-01-12T10:01:02Z")
    top["processor"] = {
        "packages": [{"package": 0, "cores": [{"core": 0, "freq_hz": 2.6e9}]}],
        "package_joules": package_j,
        "cpu_joules": cpu_j,
        "igpu_watts": igpu_w,
        "package_watts": package_w,
    }
    top["gpu"] = {"freq_hz": 300.0, "idle_ratio": 0.95}
    return top


def stream(*docs: dict) -> bytes:
    """NUL before each later document, as powermetrics writes them."""
    return b"\0".join(document(d).encode("utf-8") for d in docs)


def main() -> None:
    m4_later = apple_m4(elapsed_ns=1001234567, cpu_mj=1502, cpu_mw=1500.15, gpu_mj=100,
                        gpu_mw=99.877, combined_mw=1600.03, gpu_dict_mj=101, stamp="2025-12-18T09:41:08Z")
    m4_third = apple_m4(elapsed_ns=998765433, cpu_mj=2000, cpu_mw=2002.47, gpu_mj=50,
                        gpu_mw=50.0618, combined_mw=2052.53, gpu_dict_mj=52, stamp="2025-12-18T09:41:09Z")
    tasks = {"tasks": [{"pid": 412, "name": "Foo & Bar Helper", "cputime_ms_per_s": 3.2},
                       {"pid": 77, "name": "R&D tool &amp; co", "cputime_ms_per_s": 1.0}]}
    dup_gpu = apple_m4()
    dup_gpu["gpu"] = ("raw", "<dict>\n<key>gpu_energy</key><integer>999</integer>\n"
                              "<key>freq_hz</key><real>338.0</real>\n"
                              "<key>gpu_energy</key><integer>284</integer>\n</dict>")
    files = {
        "apple_m4_mac16_5.plist": stream(apple_m4()),
        "apple_m1_idle.plist": stream(idle_m1()),
        "intel_mac.plist": stream(intel_mac(), intel_mac(package_j=6.0, cpu_j=4.0, igpu_w=0.5)),
        "apple_m4_three_samples.plist": stream(apple_m4(), m4_later, m4_third),
        "raw_ampersand_task.plist": stream(apple_m4(extra=tasks)),
        "duplicate_gpu_key.plist": stream(dup_gpu),
    }
    whole = stream(apple_m4(), m4_later)
    files["truncated_last.plist"] = whole[: len(whole) - 400]  # second document cut off
    for name, data in files.items():
        (HERE / name).write_bytes(data)


if __name__ == "__main__":
    main()
