"""JSON as the edge reads it: strictly, once, with every size bounded before it is used.

Python's parser keeps the last of two equal keys and Triton's (RapidJSON) the first, so a request could mean
one thing here and another there: duplicate keys are refused. Also refused: NaN/Infinity literals, integers
longer than ``limits.MAX_JSON_NUMBER_DIGITS`` digits (before ``int()`` sees them), nesting deeper than the
C scanner's recursion guard, anything but UTF-8. What is forwarded is re-encoded from the parsed values.
"""

from __future__ import annotations

import json

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


def parse(data: bytes, what: str = "the request") -> object:
    """The parsed JSON value of ``data``, or Refused saying why not."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{what} is not UTF-8 JSON") from None
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
