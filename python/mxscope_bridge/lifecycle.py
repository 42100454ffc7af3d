"""How a run ends when the script does not end it: `with Bridge(...)` exiting by an exception, an
uncaught exception, Ctrl-C, SIGTERM or interpreter exit each leave one runEnded (failed with the
exception's message, or stopped) in the stream and the run log, and the bridge closes."""
from __future__ import annotations

import atexit
import signal
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from .bridge import Bridge


def end_reason(exc: Optional[BaseException], step: Optional[int]) -> Tuple[str, str]:
    """The runEnded status and reason for a run the script left with `exc` (None: left normally)."""
    at = f" at step {step}" if step is not None else ""
    if exc is None:
        return "stopped", "the script left the run loop"
    if isinstance(exc, KeyboardInterrupt):
        return "stopped", f"interrupted (KeyboardInterrupt){at}"
    if isinstance(exc, SystemExit):
        return "stopped", f"the process exited (SystemExit {exc.code}){at}"
    message = f"{type(exc).__name__}: {exc}"
    return "failed", (message if len(message) <= 1000 else message[:997] + "...") + at


def keep_sigint_exit() -> None:
    """A script that dies of an uncaught KeyboardInterrupt (Ctrl-C) exits by SIGINT, so that a shell
    loop running it stops too (bpo-1054041). CPython notes the interrupt in a flag that every eval of
    a string clears, and torch._dynamo's exit handlers (torch 2.11 with Python 3.12, which the bridge
    imports through torch.compiler.disable) evaluate one: the script then exited with status 1. An
    exit handler registered before those runs after them (last in, first out) and notes it again,
    the way CPython does, by a string eval that ends in KeyboardInterrupt. Call once, before importing
    torch._dynamo (compile_stance does, at its import)."""
    def note_interrupt_again():
        if _died_of_ctrl_c():
            try:
                exec("raise KeyboardInterrupt", {})
            except KeyboardInterrupt:
                pass
    atexit.register(note_interrupt_again)


def _died_of_ctrl_c() -> bool:
    """Whether the script's top level (a file, -c, or runpy's -m) let a KeyboardInterrupt through:
    the exception Python printed last, raised through a frame of __main__ or runpy first. A shell or
    a notebook kernel that showed one (IPython keeps it as the last too) and went on does not count."""
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if type(exc) is not KeyboardInterrupt or sys.flags.interactive or hasattr(sys, "ps1") or exc.__traceback__ is None:
        return False
    return exc.__traceback__.tb_frame.f_globals.get("__name__") in ("__main__", "runpy")


_EXIT_HANDLED: "weakref.WeakSet[Bridge]" = weakref.WeakSet()


def install_exit_handlers(bridge: "Bridge") -> None:
    """An uncaught exception, Ctrl-C, SIGTERM or interpreter exit ends the active run with a
    runEnded (failed / stopped) in the stream and the run log, and closes the bridge."""
    first = not _EXIT_HANDLED
    _EXIT_HANDLED.add(bridge)
    if not first:
        return
    previous = sys.excepthook

    def excepthook(exc_type, exc, tb):
        for each in list(_EXIT_HANDLED):
            try:
                each._on_uncaught(exc)
            except Exception as error:  # the original error matters more
                print(f"mxscope-bridge: could not end the run: {error}", file=sys.stderr)
        previous(exc_type, exc, tb)
    sys.excepthook = excepthook
    atexit.register(lambda: [each.close() for each in list(_EXIT_HANDLED)])
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        def on_sigterm(signum, frame):
            raise SystemExit(128 + signum)  # unwinds through `with Bridge` / the excepthook: the run ends stopped
        signal.signal(signal.SIGTERM, on_sigterm)
