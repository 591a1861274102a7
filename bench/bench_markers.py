"""Markers under concurrency: how many acknowledged markers each session's file holds.

Prints figures (not a test). Starts ``--sessions`` real ``tuimeter record`` processes over
a fake powercap tree (a private ``XDG_RUNTIME_DIR``, so the user's own sessions are not
marked), then fires ``--clients`` markers at once, each with its own label:

* ``cli``: that many concurrent ``tuimeter mark LABEL`` processes;
* ``api``: that many threads of this process calling ``tuimeter.mark(LABEL)``.

Then it ends the recorders (SIGTERM: final tick) and reads every CSV with pandas. Per
session: markers recorded; per label: sessions that recorded it against the sessions the
client was told got it ("acknowledged"; the CLI's ``in N session(s)`` line, or the API's
result). A run is exact when recorded == acknowledged for every label.

  python bench/bench_markers.py [--sessions 5] [--clients 200] [--mode cli|api|both]
                                [--timeout S]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from tests.fakes.powercap import FakePowercap  # noqa: E402
from tests.test_record_cli import wait_for  # noqa: E402

TUIMETER = [sys.executable, "-m", "tuimeter"]


def start_recorders(tmp: Path, n: int, env: dict) -> list[tuple[subprocess.Popen, Path]]:
    out = []
    for i in range(n):
        path = tmp / f"s{i}.csv"
        proc = subprocess.Popen(TUIMETER + ["record", "-o", str(path), "--interval", "0.5",
                                            "--no-gpu", "-q"],
                                env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
        out.append((proc, path))
    sockets = tmp / "run" / "tuimeter"
    wait_for(lambda: sockets.is_dir() and len(list(sockets.glob("*.sock"))) >= n, 60,
             "the recorders' sockets")
    wait_for(lambda: all(p.exists() and ",total,total," in p.read_text() for _, p in out), 60,
             "a first tick in every session")
    return out


#: a `tuimeter mark` process that has imported everything and waits for the start signal
#: (end of file on stdin), so that all clients connect at the same moment
CLI_AT_GO = ("import os, sys; from tuimeter.cli import main; import tuimeter.session.markers; "
             "os.write(int(sys.argv[2]), b'.'); sys.stdin.read(); "
             "sys.exit(main(['mark', *sys.argv[3:], sys.argv[1]]))")


def fire_cli(labels: list[str], env: dict, options: list[str]) -> dict[str, int]:
    """Concurrent `tuimeter mark`: label -> sessions the CLI said it marked."""
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    procs = [(lab, subprocess.Popen([sys.executable, "-c", CLI_AT_GO, lab, str(ready_w),
                                     *options],
                                    env=env, cwd=ROOT, stdin=go_r, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, pass_fds=(ready_w,)))
             for lab in labels]
    os.close(go_r)
    os.close(ready_w)
    ready = 0
    while ready < len(labels):  # every client has imported tuimeter and waits
        chunk = os.read(ready_r, 4096)
        if not chunk:
            break
        ready += len(chunk)
    os.close(ready_r)
    os.close(go_w)
    acked, codes = {}, Counter()
    for lab, p in procs:
        out, err = p.communicate()
        codes[p.returncode] += 1
        m = re.search(r"marked .* in (\d+)", out + err)
        acked[lab] = int(m.group(1)) if m else 0
    print(f"  exit statuses: {dict(sorted(codes.items()))}")
    return acked


def fire_api(labels: list[str]) -> dict[str, int]:
    """Concurrent tuimeter.mark() from threads of this process."""
    import warnings

    import tuimeter

    acked: dict[str, int] = {}
    start = threading.Barrier(len(labels))

    def one(lab: str) -> None:
        start.wait()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = tuimeter.mark(lab)
        # a result object (delivered count) or, before it existed, a bare bool
        acked[lab] = getattr(r, "delivered", None) if not isinstance(r, bool) else None
        if acked[lab] is None:
            acked[lab] = -1 if r else 0  # a bool: acknowledged by some, count unknown

    threads = [threading.Thread(target=one, args=(lab,)) for lab in labels]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return acked


def run(mode: str, sessions: int, clients: int, options: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="tuimeter-bench-") as d:
        tmp = Path(d)
        (tmp / "run").mkdir(mode=0o700)
        fake = FakePowercap(tmp / "sys").intel_desktop(dram=True, psys=False)
        env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp / "run"),
                   XDG_CONFIG_HOME=str(tmp / "config"), XDG_DATA_HOME=str(tmp / "data"),
                   TUIMETER_POWERCAP_ROOT=str(fake.sensor_root))
        env.pop("TUIMETER_SESSION", None)
        recs = start_recorders(tmp, sessions, env)
        labels = [f"{mode}-{i}" for i in range(clients)]
        t0 = time.monotonic()
        try:
            if mode == "cli":
                acked = fire_cli(labels, env, options)
            else:
                old = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "TUIMETER_SESSION")}
                os.environ["XDG_RUNTIME_DIR"] = env["XDG_RUNTIME_DIR"]
                os.environ.pop("TUIMETER_SESSION", None)
                try:
                    acked = fire_api(labels)
                finally:
                    for k, v in old.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
        finally:
            took = time.monotonic() - t0
            for p, _ in recs:
                p.send_signal(signal.SIGTERM)
            for p, _ in recs:
                p.wait(timeout=60)
        per_session, per_label = [], Counter()
        for _, path in recs:
            df = pd.read_csv(path, keep_default_na=False, dtype=str)
            got = df[(df["kind"] == "marker") & df["label"].isin(labels)]["label"]
            per_session.append(len(got))
            per_label.update(got)
        known = [lab for lab in labels if acked[lab] >= 0]
        total_acked = sum(acked[lab] for lab in known)
        wrong = [lab for lab in known if per_label[lab] != acked[lab]]
        print(f"{mode}: {clients} clients x {sessions} sessions {' '.join(options)}, "
              f"fired in {took:.1f} s")
        print(f"  recorded per session: {'/'.join(map(str, per_session))} of {clients}")
        if len(known) < len(labels):
            print(f"  acknowledged: a bare True/False for {len(labels) - len(known)} calls "
                  f"(count unknown); {sum(1 for v in acked.values() if v) } returned True")
        print(f"  acknowledged (client-reported session count, summed): {total_acked}; "
              f"recorded: {sum(per_session)}")
        print(f"  labels where recorded != acknowledged: {len(wrong)} of {len(known)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--mode", choices=("cli", "api", "both"), default="both")
    ap.add_argument("--timeout", help="passed to `tuimeter mark --timeout` (cli mode)")
    args = ap.parse_args()
    options = ["--timeout", args.timeout] if args.timeout else []
    for mode in (("cli", "api") if args.mode == "both" else (args.mode,)):
        run(mode, args.sessions, args.clients, options if mode == "cli" else [])


if __name__ == "__main__":
    main()
