"""Full garbage collections kept short while a run is active.

A process holding torch, transformers and a 1.1 B model tracks ~450,000 Python objects; a full
collection walks them all (~300 ms on the H100 machines). A stats step promotes ~15,000 short-lived
objects of its own to the old generation (per-layer hooks, their closures, the operand sums), so
CPython runs a full collection about every 7 stats steps, inside one. Frozen (`gc.freeze`), the
objects alive when the run starts are left out of collections until it ends, and those collections
walk the run's own objects only (docs/bridge.md, "Launch path and garbage collection").
"""
from __future__ import annotations

import gc
import weakref

#: A weak reference to the bridge whose run froze the collector's objects (None: nothing frozen by a
#: bridge; weak, so that it keeps no bridge alive), and whether its end thaws them (only when nothing
#: was frozen before: CPython cannot thaw part of a freeze).
_holder = None
_thaw = False


def _holding():
    return _holder() if _holder is not None else None


def freeze_for(owner) -> None:
    """Collects, then freezes every tracked object for `owner`'s run. Leaves the collector alone
    when it is off or another bridge's run holds a freeze.
    Objects frozen before (a library of the process froze a few hundred at import, or the trainer
    froze its own) stay frozen; the run's freeze then stays after the run too."""
    global _holder, _thaw
    if _holding() is not None or not gc.isenabled():
        return
    nothing_frozen = gc.get_freeze_count() == 0
    gc.collect()
    gc.freeze()
    _holder, _thaw = weakref.ref(owner), nothing_frozen


def thaw_for(owner) -> None:
    """At the end of `owner`'s run: what its start froze goes back into collections (and with it
    anything frozen since), unless objects were frozen before it."""
    global _holder
    if _holding() is owner:
        if _thaw:
            gc.unfreeze()
        _holder = None
