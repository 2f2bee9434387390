"""JSON as the edge reads it: strictly, once, with every size bounded before it is used.

Python's parser keeps the last of two equal keys and Triton's (RapidJSON) the first, so a request could mean
one thing here and another there: duplicate keys are refused. Also refused: NaN/Infinity literals, integers
longer than ``limits.MAX_JSON_NUMBER_DIGITS`` digits, numbers beyond a double, nesting deeper than the C
scanner's recursion guard, anything but UTF-8. What is forwarded is re-encoded from the parsed values.

The number checks cost a Python call per number when made as the scanner's ``parse_int``/``parse_float``
hooks: for a [1, 512] FP32 request, three quarters of the edge's parse time. So a body is parsed first
without them, by the C scanner alone, and its numbers are checked afterwards (the extremes of each list of
numbers, found at C speed); a body that fails anything is parsed again with the hooks, which give the reason
in the same words as always. The first pass converts integers the hooks would refuse, up to Python's own
4,300-digit limit: 8 MiB of such digits parse in about the time of 8 MiB of ordinary floats.
"""

from __future__ import annotations

import json
import math

from trt_plugin_kit.serving.edge import limits
from trt_plugin_kit.serving.edge.tensors import Refused


def _object_without_duplicates(pairs: list[tuple[str, object]]) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise Refused(f"the JSON repeats the key {duplicate!r}")
    return result


def _refuse_constant(name: str):
    raise Refused(f"the JSON holds {name}, which is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise Refused(f"the JSON holds a number too large for a double ({text[:20]})")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > limits.MAX_JSON_NUMBER_DIGITS:
        raise Refused(f"the JSON holds an integer of {len(text)} digits")
    return int(text)


_INTEGER_BOUND = 10**limits.MAX_JSON_NUMBER_DIGITS  # the smallest integer of one digit too many
_NUMBERS = (int, float)


def _numbers_within_bounds(value: object) -> bool:
    """What the hooks would accept: integers of at most MAX_JSON_NUMBER_DIGITS digits, finite floats."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind is int:
        return -_INTEGER_BOUND < value < _INTEGER_BOUND
    if kind is list:
        if value and type(value[0]) in _NUMBERS:
            try:  # a list of numbers only: its extremes decide (anything else in it makes max() raise)
                return _numbers_within_bounds(max(value)) and _numbers_within_bounds(min(value))
            except TypeError:
                pass
        return all(map(_numbers_within_bounds, value))
    if kind is dict:
        return all(map(_numbers_within_bounds, value.values()))
    return True  # str, bool, None


def parse(data: bytes, what: str = "the request") -> object:
    """The parsed JSON value of ``data``, or Refused saying why not."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{what} is not UTF-8 JSON") from None
    try:
        value = json.loads(
            text, object_pairs_hook=_object_without_duplicates, parse_constant=_refuse_constant
        )
        if _numbers_within_bounds(value):
            return value
    except (Refused, ValueError, RecursionError):
        pass  # refused below, for the reason the checked parse finds first
    return _parse_checked(text, what)


def _parse_checked(text: str, what: str) -> object:
    try:
        return json.loads(
            text,
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_refuse_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
    except RecursionError:
        raise Refused(f"{what} nests JSON too deeply") from None
    except ValueError as error:  # json.JSONDecodeError included
        raise Refused(f"{what} is not valid JSON: {error}") from None


def encode(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
