"""Keep a Ctrl-C from being lost inside a callback or a finalizer.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be running
Python code when SIGINT arrives. Some code has no caller to pass it to: a callback
that a C library calls through :mod:`ctypes`, as llvmlite does while Numba compiles a
kernel (the first epoch's first call of the Numba attention kernel), or a ``__del__``
that the garbage collector runs. Python then prints "Exception ignored ..." and the
command runs on as if Ctrl-C had never been pressed.

:func:`interrupts_not_lost` catches such a lost ``KeyboardInterrupt`` at
:data:`sys.unraisablehook` and delivers it again shortly after, once the main thread
is back in ordinary Python code.

The command line uses it, and ends on the interrupt. A Python session that catches
the interrupt and compiles on risks a crash with or without it: in stress tests of 80
interrupted Numba compiles in one process, a later compile crashed the process
(segmentation fault) in 1 of 4 runs without this and in 2 of 5 with it.
"""

from __future__ import annotations

import _thread
import contextlib
import sys
import threading
from collections.abc import Iterator

__all__ = ["REDELIVERY_DELAY_S", "interrupts_not_lost"]

# Long enough for the hook to return and the callback to hand control back to its C
# caller (microseconds), so that the new interrupt is not raised inside the hook itself,
# where it would be lost for good; short enough for nobody to notice.
REDELIVERY_DELAY_S = 0.05


@contextlib.contextmanager
def interrupts_not_lost() -> Iterator[None]:
    """Within this block, a ``KeyboardInterrupt`` that Python had to ignore is raised
    again in the main thread (:func:`_thread.interrupt_main`, which calls the SIGINT
    handler: nothing happens if SIGINT is ignored). One still waiting for its delay when
    the block ends is delivered as the block exits, never later. Other exceptions that
    cannot be raised go to the hook that was in place before, which is restored on exit.
    Use it in the main thread (where Python raises ``KeyboardInterrupt``), one block at
    a time: the hook is process-wide.
    """
    previous = sys.unraisablehook
    lock = threading.Lock()
    state = {"open": True, "waiting": 0}
    timers: list[threading.Timer] = []

    def redeliver() -> None:
        with lock:
            state["waiting"] -= 1
            if state["open"]:
                _thread.interrupt_main()

    def hook(unraisable) -> None:
        if not issubclass(unraisable.exc_type, KeyboardInterrupt):
            previous(unraisable)
            return
        timer = threading.Timer(REDELIVERY_DELAY_S, redeliver)
        timer.daemon = True  # never holds up the interpreter's exit
        with lock:
            state["waiting"] += 1
        timers.append(timer)
        timer.start()

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
        with lock:  # a redelivery under way finishes first; none starts after
            state["open"] = False
            missed = state["waiting"] > 0
        for timer in timers:
            timer.cancel()
        if missed:  # delivered now, through the SIGINT handler like the others
            _thread.interrupt_main()
