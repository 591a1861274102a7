"""A fake ``amdsmi`` module (AMD SMI's Python package) over scripted AMD GPUs.

Inject it with ``monkeypatch.setitem(sys.modules, "amdsmi", make_fake_amdsmi([FakeAmdGpu()]))``.
The real package cannot be installed here (it needs ROCm), so what this copies comes from
its Python API reference (ROCm/amdsmi ``py-interface/README.md`` and
``amdsmi_interface.py``, ROCm 6.2):

* errors: ``AmdSmiException``, and ``AmdSmiLibraryException(err_code)`` derived from it,
  with ``get_error_code()`` / ``get_error_info()``; any call before ``amdsmi_init`` raises
  it with ``AMDSMI_STATUS_NOT_INIT`` (32);
* ``amdsmi_get_energy_count(h)`` -> dict with ``energy_accumulator`` (and the deprecated
  ``power``, the same value), ``counter_resolution`` (float µJ per count; 15.259 on MI200 and
  MI300) and ``timestamp``; energy in µJ = accumulator x resolution;
* ``amdsmi_get_power_info(h)`` -> dict: ``current_socket_power``, ``average_socket_power``
  (int W), ``gfx_voltage`` ..., ``power_limit``; a value the GPU lacks is the string "N/A";
* ``amdsmi_get_gpu_process_list(h)`` -> list of dicts: ``name``, ``pid``, ``mem`` (bytes),
  ``engine_usage`` {``gfx``, ``enc``} (ns, cumulative), ``memory_usage`` {...};
* ``amdsmi_get_gpu_asic_info(h)["market_name"]``, ``amdsmi_get_gpu_device_uuid(h)`` (str).
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

NOT_SUPPORTED, NOT_INIT, UNKNOWN = 2, 32, 0xFFFFFFFF


class AmdSmiException(Exception):
    pass


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int):
        super().__init__(f"Error code:\n\t{err_code} | AMDSMI_STATUS")
        self.err_code = err_code
        self.err_info = f"AMDSMI_STATUS {err_code}"

    def get_error_code(self) -> int:
        return self.err_code

    def get_error_info(self) -> str:
        return self.err_info


@dataclass
class FakeAmdGpu:
    """One GPU: the energy accumulator (counts), power (W), processes
    ``[(pid, mem_bytes, gfx_ns)]`` and faults to inject."""

    name: str = "AMD Instinct MI300X"
    uuid: str = "5fff74a1-0000-1000-80ff-ffffffffffff"
    accumulator: int = 123_456_789
    resolution_uj: float = 15.259
    power_w: int | str = 300
    average_power_w: int | str = 295
    power_limit_w: int | str = 750
    processes: list = field(default_factory=list)
    energy_errors: int = 0  # the next N energy reads raise AmdSmiLibraryException

    def advance(self, joules: float) -> None:
        """The GPU used ``joules``: the accumulator moves in whole counts."""
        self.accumulator += round(joules * 1e6 / self.resolution_uj)

    def run(self, pid: int, gfx_ns: int, mem: int = 1 << 30) -> None:
        """Process ``pid`` has used the graphics engine for ``gfx_ns`` in all (cumulative)."""
        self.processes = [p for p in self.processes if p[0] != pid] + [(pid, mem, gfx_ns)]


def make_fake_amdsmi(gpus: list[FakeAmdGpu]) -> types.ModuleType:
    m = types.ModuleType("amdsmi")
    m.AmdSmiException = AmdSmiException
    m.AmdSmiLibraryException = AmdSmiLibraryException
    state = {"init": 0}

    def need_init():
        if state["init"] <= 0:
            raise AmdSmiLibraryException(NOT_INIT)

    def gpu(handle) -> FakeAmdGpu:
        need_init()
        return gpus[handle]

    def init(flag=None):
        state["init"] += 1

    def shut_down():
        need_init()
        state["init"] -= 1

    def energy_count(h):
        g = gpu(h)
        if g.energy_errors:
            g.energy_errors -= 1
            raise AmdSmiLibraryException(UNKNOWN)
        return {"power": g.accumulator, "energy_accumulator": g.accumulator,
                "counter_resolution": g.resolution_uj, "timestamp": 0}

    def power_info(h):
        g = gpu(h)
        return {"current_socket_power": g.power_w, "average_socket_power": g.average_power_w,
                "gfx_voltage": "N/A", "soc_voltage": "N/A", "mem_voltage": "N/A",
                "power_limit": g.power_limit_w}

    def process_list(h):
        return [{"name": "N/A", "pid": pid, "mem": mem,
                 "engine_usage": {"gfx": gfx, "enc": 0},
                 "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": mem}}
                for pid, mem, gfx in gpu(h).processes]

    m.amdsmi_init = init
    m.amdsmi_shut_down = shut_down
    m.amdsmi_get_processor_handles = lambda: need_init() or list(range(len(gpus)))
    m.amdsmi_get_gpu_asic_info = lambda h: {"market_name": gpu(h).name, "vendor_id": 0x1002}
    m.amdsmi_get_gpu_device_uuid = lambda h: gpu(h).uuid
    m.amdsmi_get_energy_count = energy_count
    m.amdsmi_get_power_info = power_info
    m.amdsmi_get_gpu_process_list = process_list
    m.state = state
    return m
