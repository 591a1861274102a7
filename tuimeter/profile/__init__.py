"""Energy per Python function (``tuimeter profile``, ``Meter(profile=True)``).

* :mod:`.sampler`: the in-process stack sampler and the bootstrap that runs a program
  under it (standard library only: it runs in the profiled program's interpreter);
* :mod:`.spread`: each engine tick's attributed energy spread over the sampled stacks;
* :mod:`.ticks`: the engine listener that keeps those ticks, and the profile made of both;
* :mod:`.result`: per-function figures and the outputs (table, JSON, folded, speedscope);
* :mod:`.cli`, :mod:`.run`, :mod:`.pyspy`: the command (a program it starts, or a running
  one sampled from outside with py-spy).

Headless: nothing here imports the UI.
"""
