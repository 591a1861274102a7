"""Wait for queued GPU work before a phase edge (``Meter(sync="cuda")``, ``mark(sync=True)``).

CUDA kernels run asynchronously: a phase edge stamped while kernels of the phase are
still queued charges their energy to the next phase. Before stamping, this waits for
the current device through whichever of ``torch`` or ``cupy`` the program has *already
imported* (looked up in ``sys.modules``: this module never imports either, which would
cost seconds and could initialise CUDA in a program that never used it). As Zeus does
before it closes a measurement window.

* torch: ``torch.cuda.synchronize()`` when ``torch.cuda.is_initialized()`` (a program
  that has not touched CUDA has nothing queued; calling it then would initialise CUDA);
* cupy: ``cupy.cuda.Device().synchronize()`` (the current device).

Without either, :func:`synchronize` warns once per process and returns None. A failing
synchronise (a lost device) warns and lets the edge be stamped anyway: the measured
program matters more than an exact edge.
"""

from __future__ import annotations

import sys
import warnings

#: the values of ``Meter(sync=...)``
SYNC_KINDS = ("cuda",)

_warned = False


def check_sync(sync: object) -> str | None:
    """``sync`` if it is None or one of :data:`SYNC_KINDS`; ValueError otherwise."""
    if sync is None or sync in SYNC_KINDS:
        return sync  # type: ignore[return-value]
    raise ValueError(f"sync must be None or one of {', '.join(map(repr, SYNC_KINDS))}, "
                     f"not {str(sync)[:20]!r}")


def synchronize() -> str | None:
    """Wait for the queued work of the current CUDA device through the already imported
    torch or cupy; returns which one was used ("torch", "cupy"), else None (one warning
    per process when neither is imported)."""
    global _warned
    torch = sys.modules.get("torch")
    cupy = sys.modules.get("cupy")
    try:
        if torch is not None and getattr(torch, "cuda", None) is not None:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
            return "torch"
        if cupy is not None and getattr(cupy, "cuda", None) is not None:
            cupy.cuda.Device().synchronize()
            return "cupy"
    except Exception as exc:  # a lost device: stamp anyway
        warnings.warn(f"tuimeter: could not wait for the GPU ({exc}); the phase edge may "
                      f"charge queued kernels to the next phase", RuntimeWarning, stacklevel=3)
        return None
    if not _warned:
        _warned = True
        warnings.warn("tuimeter: sync asked for, but neither torch nor cupy is imported; "
                      "phase edges are not synchronised with the GPU", RuntimeWarning,
                      stacklevel=3)
    return None
