"""Put on ``PYTHONPATH`` of a ``tuimeter record`` subprocess: with
``TUIMETER_TEST_GPU_FILE`` set, ``pynvml`` is the fake of tests/fakes/fake_pynvml.py (one
H200), whose energy counter is its driver's start value plus the joules written in that
file (the test rewrites it, atomically, to run the GPU), so a test can feed a real
recorder's GPU from outside. Without the variable this does nothing."""

import os
import sys

_file = os.environ.get("TUIMETER_TEST_GPU_FILE")
if _file:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))))))
    from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml

    class _FileGpu(FakeGpu):
        """energy_mj = the start value + 1000 x the joules in the file."""

        @property  # type: ignore[override]
        def energy_mj(self) -> int:
            try:
                with open(_file) as fh:
                    joules = float(fh.read() or 0)
            except (OSError, ValueError):
                joules = 0.0
            return self._start_mj + round(joules * 1000)

        @energy_mj.setter
        def energy_mj(self, value: int) -> None:
            self._start_mj = value

    sys.modules["pynvml"] = make_fake_pynvml([_FileGpu()])
