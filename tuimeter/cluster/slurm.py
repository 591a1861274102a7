"""A SLURM job's nodes, from SLURM's own tools: ``squeue`` (a job that is pending or
running) then ``scontrol show hostnames`` to expand its node list (``node[01-04,07]``),
or ``sacct`` once the job ended. Where SLURM is not installed, one line says so.

The tools' output is not trusted: every node name is checked
(:func:`~tuimeter.cluster.options.check_host`), a command that hangs is stopped after
:data:`TIMEOUT_S`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Mapping

from .options import check_host

TIMEOUT_S = 10.0
MAX_NODES = 100_000


class SlurmError(Exception):
    """The job's nodes cannot be known; one line."""


def _run(argv: list[str], env: Mapping[str, str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                           env=dict(env), check=False)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} did not answer within {TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise SlurmError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    if r.returncode != 0:
        first = (r.stderr.strip().splitlines() or [""])[0][:160]
        raise SlurmError(f"{' '.join(argv[:2])} failed (status {r.returncode})"
                         + (f": {first}" if first else ""))
    return r.stdout


def _which(name: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH", os.defpath))


def job_nodes(job: str, env: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The nodes of SLURM job ``job`` (checked names, in SLURM's order)."""
    squeue, scontrol, sacct = (_which(n, env) for n in ("squeue", "scontrol", "sacct"))
    if squeue is None and sacct is None:
        raise SlurmError("--slurm-job: SLURM is not installed here (no squeue or sacct on "
                         "PATH); name the nodes with --nodes A,B or select them by label "
                         "with --selector")
    nodelist = ""
    if squeue is not None:
        out = _run([squeue, "--noheader", "--jobs", job, "--format", "%N"], env)
        nodelist = next((ln.strip() for ln in out.splitlines() if ln.strip()), "")
    if not nodelist and sacct is not None:  # ended (squeue forgets it after a while)
        out = _run([sacct, "--noheader", "--parsable2", "--allocations", "--jobs", job,
                    "--format", "NodeList"], env)
        nodelist = next((ln.strip() for ln in out.splitlines()
                         if ln.strip() and ln.strip() != "None assigned"), "")
    if not nodelist:
        raise SlurmError(f"--slurm-job {job}: SLURM knows no nodes of this job (not "
                         "started yet, or forgotten)")
    if scontrol is not None:
        names = _run([scontrol, "show", "hostnames", nodelist], env).split()
    elif "[" in nodelist:
        raise SlurmError(f"--slurm-job {job}: no scontrol to expand {nodelist[:60]!r}")
    else:
        names = nodelist.split(",")
    if len(names) > MAX_NODES:
        raise SlurmError(f"--slurm-job {job}: more than {MAX_NODES} nodes")
    try:
        return tuple(dict.fromkeys(check_host(n) for n in names))
    except ValueError as exc:
        raise SlurmError(f"--slurm-job {job}: SLURM named a node tuimeter refuses: {exc}"
                         ) from None
