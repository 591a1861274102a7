"""The bootstrap's entry: ``tuimeter profile`` runs this file by its path with the
program's own interpreter (``python .../boot.py --out FILE --rate HZ -- SCRIPT ARGS``).

Python compiles the script it is given every time and never caches it: for
:mod:`sampler` itself that was 6 ms of every profiled program's start. So this small file
is the script, and it loads ``sampler.py`` beside it by its path as a module, from its
bytecode cache (written at install, or by the first run). Standard library only, and not
as ``tuimeter.profile.sampler``: the program's interpreter need not have tuimeter, and a
module of the program's called ``sampler`` is not shadowed (nothing is added to
``sys.path``, and the module is not in ``sys.modules``).

The program's code runs right here, at this file's top level (:func:`sampler.start_program`
returns it): its frames sit on this one frame, as under ``python SCRIPT`` they sit on none.
"""

import os
import sys


def load_sampler():
    """``sampler.py`` beside this file, loaded as a module of its own."""
    from importlib.machinery import SourceFileLoader

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sampler.py")
    module = type(sys)("_tuimeter_profile_sampler")
    module.__file__ = path
    SourceFileLoader(module.__name__, path).exec_module(module)
    return module


if __name__ == "__main__":
    _sampler = load_sampler()
    _go = _sampler.start_program(sys.argv[1:], sys._getframe().f_code)
    if _go is not None:
        try:
            exec(*_go)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as _exc:  # noqa: BLE001 (python SCRIPT reports every one)
            _sampler.uncaught(_exc)
