"""The doctor's checks that take no window: powermetrics, the estimate, the carbon settings."""

from __future__ import annotations

import os
import shutil
import warnings
from typing import Callable, Mapping

from .. import carbon
from ..config import default_config_path
from ..settings import resolve_carbon, resolve_live
from ..model import SensorStatus
from ..sensors import estimate, powermetrics
from ._common import Probe


class PowermetricsProbe(Probe):
    """Is powermetrics there, and may we run it (root, or a sudoers line)? It is not started:
    that needs root and takes a sample interval."""

    name = "powermetrics"

    def __init__(self, platform: str, geteuid: Callable[[], int] | None = None,
                 sudo_check: Callable[[], bool] | None = None,
                 which: Callable[[str], str | None] = shutil.which):
        super().__init__()
        self.platform = platform
        self.which = which
        self.geteuid = geteuid or getattr(os, "geteuid", lambda: -1)
        self.sudo_check = sudo_check or powermetrics._sudo_allows_powermetrics

    def begin(self) -> None:
        s = self.section
        path = self.which("powermetrics") or (
            "/usr/bin/powermetrics" if os.path.exists("/usr/bin/powermetrics") else None)
        s.update(found=self.platform == "darwin" and path is not None, path=path,
                 root=None, sudoers=None)
        if self.platform == "darwin":
            s["root"] = self.geteuid() == 0
            s["sudoers"] = False if s["root"] else bool(self.sudo_check())
        # the sensor's own reason and fix; the binary was looked for above (and is not run:
        # a runner other than Popen makes the sensor skip its own PATH search)
        status = powermetrics.PowermetricsSensor(
            runner=lambda argv: None, platform=self.platform,
            geteuid=lambda: 0 if s["root"] else 1000,
            sudo_check=lambda: bool(s["sudoers"])).is_available()
        if self.platform == "darwin" and path is None:
            status = SensorStatus(status.name, False, "powermetrics not found",
                                  "it ships with macOS in /usr/bin")
        s.update(available=status.available, reason=status.reason, fix=status.fix)
        if s["found"] and not status.available:
            self.error(status.reason, status.fix)


class EstimateProbe(Probe):
    """The fallback: CPU model, its TDP-table match, memory, and whether it would be used."""

    name = "estimate"

    def __init__(self, model_name: str | None = None, threads: int | None = None):
        super().__init__()
        self.model_name = model_name
        self.threads = threads

    def begin(self) -> None:
        model = self.model_name if self.model_name is not None else estimate.cpu_model_name()
        threads = self.threads if self.threads is not None else (os.cpu_count() or 1)
        match = estimate.lookup_tdp(model, threads)
        self.section.update(cpu_model=model, threads=threads, tdp_w=match.tdp_w,
                            tdp_table_match=match.table_name, description=match.describe(),
                            memory_w_per_gib=estimate.MEMORY_W_PER_GIB, in_use=None)
        try:
            gib = estimate._installed_memory_bytes() / 2**30
        except Exception:  # noqa: BLE001 - psutil missing or odd: the rest still helps
            gib = None
        self.section["memory_gib"] = gib

    def decide(self, cpu_measured: bool) -> None:
        """The estimate fills in only when nothing measures the CPU (discover's rule)."""
        self.section["in_use"] = not cpu_measured
        if not cpu_measured and self.section.get("tdp_table_match") is None:
            self.warning(f"CPU {self.section.get('cpu_model')!r} is not in the TDP table: the "
                         f"estimate assumes {estimate.UNKNOWN_TDP_PER_THREAD_W:g} W per thread",
                         "measure instead (RAPL, powermetrics) where you can; the estimate "
                         "is a rough guide")


#: the doctor waits this long for the live carbon source's answer, s
LIVE_TIMEOUT_S = 5.0


class CarbonProbe(Probe):
    """The carbon settings in force (arguments aside): environment, then config file; and
    the live carbon source configured, with its answer to one fetch."""

    name = "carbon"

    def __init__(self, env: Mapping[str, str]):
        super().__init__()
        self.env = env
        self._live = None  # the live carbon source's fetcher, when one is configured

    def begin(self) -> None:
        path = default_config_path(self.env)
        s = self.section
        s.update(config_path=str(path), config_exists=path.exists(),
                 environment={k: self.env[k] for k in (carbon.ENV_COUNTRY, carbon.ENV_INTENSITY,
                                                       carbon.ENV_PUE) if self.env.get(k)},
                 g_per_kwh=None, pue=None, source=None, is_default=None)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                info = resolve_carbon(env=self.env)
            except ValueError as exc:  # CarbonError, or ConfigError for the file itself
                self.error(str(exc), "correct the setting named above (or unset it)")
                info = None
        for w in seen:
            self.warning(str(w.message), "")
        if info is not None:
            s.update(g_per_kwh=info.g_per_kwh, pue=info.pue, source=info.source,
                     is_default=info.is_default)
        self._begin_live(info)

    def _begin_live(self, info) -> None:
        """The live carbon source configured (``carbon_source``; the token is never shown)
        and one fetch from it, on its own thread during the window."""
        from .. import carbon_live

        s = self.section
        s["live"] = None
        try:
            settings = resolve_live(env=self.env)
        except ValueError as exc:
            self.error(str(exc), "correct the setting named above (or unset it)")
            return
        if settings is None:
            return
        s["live"] = {"source": settings.source, "zone": settings.zone, "url": settings.url,
                     "token": None if settings.token is None else "set", "answer": None}
        if info is not None:
            self._live = carbon_live.LiveCarbon(
                settings.source, carbon_live.make_fetch(settings, LIVE_TIMEOUT_S), info,
                warn=None)
            self._live.start()

    def wants_window(self) -> bool:
        return self._live is not None

    def end(self) -> None:
        """The live source's answer (waiting at most LIVE_TIMEOUT_S more)."""
        live = self._live
        if live is None:
            return
        live.wait_answers(1, LIVE_TIMEOUT_S)
        live.close()
        now = live.current()
        self.section["live"]["answer"] = {"g_per_kwh": now.g_per_kwh, "source": now.source,
                                          "provider": now.provider}
        if now.provider == "table":
            self.warning(f"carbon source {live.name}: no usable answer ({now.source}); the "
                         f"table figure would stand in",
                         "check the token, the zone and the network (or the URL set)")
