"""JSON from clients, parsed at a bounded cost: nesting is checked before `json.loads` by a scan that
runs in C-level string operations, and the parse accepts exactly what JavaScript's JSON.parse does
(no NaN/Infinity literals) so the bridge and the TypeScript side classify frames alike.

Why a depth limit: `json.loads` recurses once per nesting level, so a frame of 4 MiB of `[` raises
RecursionError (it used to kill the reader thread) and any deep frame costs stack and time for
nothing: no protocol message nests deeper than about 6 levels.
"""
from __future__ import annotations

import json

MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a frame may have (the same figure as the TypeScript side)."""

_KEEP_ONLY_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_SQUARE = bytes.maketrans(b"{}", b"[]")


class JsonRefused(ValueError):
    """The frame is not JSON this server will parse; the message says why."""


def nesting_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when brackets outside strings nest deeper than `limit` (or are unbalanced past it).

    Every step is a C-level bytes operation: escapes that could hide a quote are removed, then all
    but quotes and brackets, then strings; each `replace("[]")` pass strips one nesting level, so
    what is left after `limit` passes nests deeper than `limit` or does not balance."""
    if text.count("[") + text.count("{") <= limit:
        return False
    raw = text.encode("utf-8", "surrogatepass")
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    raw = raw.translate(_SQUARE, _KEEP_ONLY_STRUCTURE).replace(b'""', b"")
    if b'"' in raw:
        raw = b"".join(raw.split(b'"')[::2])
    for _ in range(limit):
        shorter = raw.replace(b"[]", b"")
        if not shorter:
            return False
        if len(shorter) == len(raw):
            return True
        raw = shorter
    return True


def _refuse_constant(name: str):
    raise JsonRefused(f"{name} is not JSON (JSON has no NaN or Infinity: send null)")


def _bounded_int(digits: str):
    # Python's int() of a long digit string is slow (and refused past 4300 digits); no protocol
    # integer has more than 16 digits, and a float is what JavaScript would make of it anyway.
    return int(digits) if len(digits) <= 20 else float(digits)


def loads_bounded(text: str, limit: int = MAX_JSON_DEPTH):
    """json.loads with the depth limit and JavaScript's grammar; raises JsonRefused (a ValueError)."""
    if nesting_exceeds(text, limit):
        raise JsonRefused(f"JSON nested deeper than {limit} levels")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_bounded_int)
    except JsonRefused:
        raise
    except (ValueError, RecursionError, MemoryError) as error:
        raise JsonRefused(str(error) or type(error).__name__) from None
