"""A Ctrl-C that lands in a ctypes callback (llvmlite's, while Numba compiles) or in a
finalizer is not lost.

The callbacks here are real ctypes callbacks called through their C trampolines, as
llvmlite's are: an exception that leaves one is "ignored" by ctypes, as in the field.
Each test that expects the interrupt uses `sigint_as_in_a_terminal`: with SIGINT
ignored, as in a background job, `_thread.interrupt_main()` does nothing.
"""

from __future__ import annotations

import ctypes
import sys
import time

import pytest

from graphattn.cli.interrupts import REDELIVERY_DELAY_S, interrupts_not_lost

CALLBACK = ctypes.CFUNCTYPE(None)


def spin(seconds: float) -> None:
    """Run Python bytecode (where a pending interrupt is raised) for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


def interrupt() -> None:
    raise KeyboardInterrupt


def nothing_arrives_later() -> None:
    try:
        spin(10 * REDELIVERY_DELAY_S)
    except KeyboardInterrupt:
        pytest.fail("an interrupt arrived after the block had ended")


def test_without_it_ctypes_swallows_the_interrupt(monkeypatch):
    # the failure being guarded against: the callback's KeyboardInterrupt goes nowhere
    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    CALLBACK(interrupt)()
    spin(10 * REDELIVERY_DELAY_S)
    assert [u.exc_type for u in ignored] == [KeyboardInterrupt]


def test_a_swallowed_interrupt_is_raised_again_in_python_code(sigint_as_in_a_terminal):
    callback = CALLBACK(interrupt)
    started = time.monotonic()
    with interrupts_not_lost(), pytest.raises(KeyboardInterrupt):
        callback()  # returns: ctypes cannot raise from here
        spin(5)
    assert time.monotonic() - started < 2


def test_an_interrupt_swallowed_again_on_redelivery_still_arrives(sigint_as_in_a_terminal):
    # Numba's compile calls llvmlite's callbacks many times: the interrupt delivered again
    # may land in the next one, and be swallowed again
    calls = []

    def slow_after_the_first() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise KeyboardInterrupt
        spin(6 * REDELIVERY_DELAY_S)  # the interrupt delivered again lands in here

    callback = CALLBACK(slow_after_the_first)
    with interrupts_not_lost(), pytest.raises(KeyboardInterrupt):
        callback()
        callback()  # interrupted (and swallowed) about five times while it spins
        spin(5)
    assert len(calls) == 2


def test_an_interrupt_in_a_finalizer_is_raised_again(sigint_as_in_a_terminal):
    class InterruptedWhenCollected:
        def __del__(self) -> None:
            raise KeyboardInterrupt

    with interrupts_not_lost(), pytest.raises(KeyboardInterrupt):
        InterruptedWhenCollected()  # collected at once: "Exception ignored in: ... __del__"
        spin(5)


def test_an_interrupt_still_waiting_when_the_block_ends_is_raised_as_it_exits(
    sigint_as_in_a_terminal,
):
    # its timer fired after the command had returned, as a bare traceback
    with pytest.raises(KeyboardInterrupt), interrupts_not_lost():
        CALLBACK(interrupt)()  # ends at once, long before the redelivery's delay
    nothing_arrives_later()


def test_two_swallowed_interrupts_are_raised_once(sigint_as_in_a_terminal):
    callback = CALLBACK(interrupt)
    with pytest.raises(KeyboardInterrupt), interrupts_not_lost():
        callback()
        callback()  # a second Ctrl-C during the same compile
        spin(5)
    nothing_arrives_later()  # the second one's redelivery does not follow


def test_other_unraisable_errors_go_to_the_hook_before_it_which_is_restored(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)

    def fails() -> None:
        raise ValueError("not an interrupt")

    with interrupts_not_lost():
        assert sys.unraisablehook is not seen.append
        CALLBACK(fails)()
    assert sys.unraisablehook == seen.append
    assert [(u.exc_type, str(u.exc_value)) for u in seen] == [(ValueError, "not an interrupt")]


def test_the_command_line_runs_its_commands_with_it(monkeypatch, capsys, sigint_as_in_a_terminal):
    from graphattn.cli import main as cli

    def compiles_then_trains(args) -> int:
        CALLBACK(interrupt)()  # Ctrl-C lost in a compile callback
        spin(5)  # training on: the interrupt must arrive here
        return 0

    monkeypatch.setattr(cli, "_run_command", compiles_then_trains)
    assert cli.main(["bench", "--quick", "--out", "unused"]) == 130
    assert capsys.readouterr().err.strip() == "graphattn bench: interrupted"
