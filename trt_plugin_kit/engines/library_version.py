"""The TensorRT version a plugin library of ours was built against, read from the file without loading it,
and version strings parsed: what the engine builder and the artifact checks both need (one home below
both)."""

from __future__ import annotations

import re
from pathlib import Path

from trt_plugin_kit.engines.errors import CheckFailed


def parse_version(text: str) -> tuple[int, ...]:
    """'10.13.3.9' -> (10, 13, 3, 9); a stamp from another tool may carry a suffix ('10.13.3.9-1+cuda13')."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)*)(?:[-+~].*)?\s*", text)
    if not match:
        raise CheckFailed(f"not a TensorRT version: {text.strip()!r}")
    return tuple(int(part) for part in match[1].split("."))


BUILT_AGAINST = re.compile(rb"trt_plugin_kit built against TensorRT headers (\d+(?:\.\d+)+)\0")


def headers_version(library: Path) -> str | None:
    """The TensorRT headers our plugin library was compiled against (registration.cpp writes them into the
    file), read without loading it; None for a library that is not ours."""
    match = BUILT_AGAINST.search(library.read_bytes())
    return match[1].decode() if match else None
