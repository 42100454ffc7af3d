"""Validation combinators with the semantics of src/protocol/validate.ts, so the bridge classifies a
message exactly as the TypeScript side does (test/conformance holds the cases both must agree on).

A schema is a function (value, path) that raises Invalid naming the path; the message reads like
the TypeScript one: `.change.gemms.wgrad.rotation: expected one of "none", …, got "sideways"`.
JavaScript semantics kept on purpose: an integer is any number with no fraction (2.0 is 2), string
lengths count UTF-16 code units, booleans are never numbers.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Dict, Iterable

Schema = Callable[[Any, str], Any]
MAX_SAFE_INTEGER = 2**53 - 1
MAX_DOUBLE = 1.7976931348623157e308


class _Missing:
    """An absent field, described as TypeScript describes it ("got undefined")."""


MISSING = _Missing()


class Invalid(ValueError):
    def __init__(self, path: str, expected: str, got: Any):
        super().__init__(f"{path or '(root)'}: expected {expected}, got {describe(got)}")
        self.path = path


def describe(value: Any) -> str:
    if value is MISSING:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 40 else value[:40] + "…", ensure_ascii=False)
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    return f"number {value}"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    return is_number(value) and (isinstance(value, int) or value.is_integer())


def js_length(text: str) -> int:
    """String length as JavaScript counts it (UTF-16 code units)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def _predicate(test: Callable[[Any], bool], expected: str) -> Schema:
    def schema(value, path):
        if not test(value):
            raise Invalid(path, expected, value)
        return value
    schema.test = test  # array_of tests numbers in a tight loop, as validate.ts does
    return schema


num = _predicate(lambda v: is_number(v) and math.isfinite(v), "a finite number")
boolean = _predicate(lambda v: isinstance(v, bool), "a boolean")


def int_in(low: int, high: int) -> Schema:
    return _predicate(lambda v: is_integer(v) and low <= v <= high, f"an integer in [{low}, {high}]")


def num_in(low: float, high: float) -> Schema:
    return _predicate(lambda v: is_number(v) and low <= v <= high, f"a number in [{low}, {high}]")


non_neg_int = int_in(0, MAX_SAFE_INTEGER)


def string(max_length: int = 4096) -> Schema:
    def schema(value, path):
        if not isinstance(value, str):
            raise Invalid(path, "a string", value)
        if js_length(value) > max_length:
            raise Invalid(path, f"a string of at most {max_length} characters", value)
        return value
    return schema


def literal(*allowed) -> Schema:
    expected = "one of " + ", ".join(json.dumps(a) for a in allowed)
    return _predicate(lambda v: not isinstance(v, bool) and not isinstance(v, (dict, list)) and v in allowed, expected)


def nullable(schema: Schema) -> Schema:
    return lambda value, path: None if value is None else schema(value, path)


def array_of(item: Schema, max_length: int) -> Schema:
    test = getattr(item, "test", None)

    def schema(value, path):
        if not isinstance(value, list):
            raise Invalid(path, "an array", value)
        if len(value) > max_length:
            raise Invalid(path, f"an array of at most {max_length} items", value)
        for i, element in enumerate(value):
            if test is None or not test(element):
                item(element, f"{path}[{i}]")
        return value
    return schema


def _object_or_raise(value, path, expected="an object"):
    if not isinstance(value, dict):
        raise Invalid(path, expected, value)


def record_of(item: Schema, max_keys: int) -> Schema:
    def schema(value, path):
        _object_or_raise(value, path)
        if len(value) > max_keys:
            raise Invalid(path, f"an object of at most {max_keys} keys", value)
        for key, element in value.items():
            item(element, f"{path}.{key}")
        return value
    return schema


class optional:
    """Marks a field of `obj({...})` as optional (absent passes)."""

    def __init__(self, schema: Schema):
        self.schema = schema


def obj(shape: Dict[str, Any]) -> Schema:
    """An object whose listed fields are checked; unknown extra fields are allowed and kept."""
    def schema(value, path):
        _object_or_raise(value, path)
        for key, field in shape.items():
            at = f"{path}.{key}"
            if key not in value:
                if isinstance(field, optional):
                    continue
                raise Invalid(at, "a value (field is required)", MISSING)
            (field.schema if isinstance(field, optional) else field)(value[key], at)
        return value
    return schema


def partial_of(fields: Dict[str, Schema], what: str) -> Schema:
    """Only the listed fields, each optional; any other key (`__proto__` too) is refused by name."""
    def schema(value, path):
        _object_or_raise(value, path, what)
        for key, element in value.items():
            if key not in fields:
                raise Invalid(f"{path}.{key}", f"no such field: {what} has {', '.join(fields)}", element)
            fields[key](element, f"{path}.{key}")
        return value
    return schema


def refined(schema: Schema, rule: Callable[[Any, str], None]) -> Schema:
    def refined_schema(value, path):
        checked = schema(value, path)
        rule(checked, path)
        return checked
    return refined_schema


_ISO_8601 = re.compile(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)")
iso_date_time = _predicate(lambda v: isinstance(v, str) and v.isascii() and _ISO_8601.fullmatch(v) is not None,
                           'an ISO 8601 date-time with a zone, e.g. "2026-11-21T16:39:08.886Z"')


def union(members: Dict[str, Schema]) -> Schema:
    """Discriminated on `type`: the member schema is picked by tag, so its error names the field."""
    known = ", ".join(members)

    def schema(value, path):
        _object_or_raise(value, path, 'an object with a "type" field')
        tag = value.get("type")
        if not isinstance(tag, str) or tag not in members:
            raise Invalid(f"{path}.type", f"one of {known}", value.get("type", MISSING))
        return members[tag](value, path)
    return schema


def has_unknown_type(value: Any, known: Iterable[str]) -> bool:
    """A message whose `type` is a string this side does not know: ignored, not refused."""
    return isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"] not in known
