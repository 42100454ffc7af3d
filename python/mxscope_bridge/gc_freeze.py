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

#: The bridge whose run froze the collector's objects (None: nothing frozen by a bridge).
_holder = None


def freeze_for(owner) -> int:
    """Collects, then freezes every tracked object for `owner`'s run; returns how many were frozen.
    Leaves the collector alone (returns 0) when it is off, or when objects are frozen already: by the
    trainer itself, which then manages freezing, or by another bridge's run."""
    global _holder
    if not gc.isenabled() or gc.get_freeze_count():
        return 0
    gc.collect()
    gc.freeze()
    _holder = owner
    return gc.get_freeze_count()


def thaw_for(owner) -> None:
    """At the end of `owner`'s run: what its start froze goes back into collections (and with it
    anything frozen since)."""
    global _holder
    if _holder is owner:
        gc.unfreeze()
        _holder = None
