"""Small pieces the commands share."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from clients.contracts import ModelCheck
from clients.errors import InferenceError, UsageError
from clients.runner import Outcome
from clients.tritonserver import ConnectionSettings

T = TypeVar("T")


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def sending_options(args: argparse.Namespace) -> dict[str, Any]:
    """`run_jobs` keywords from the sending commands' flags (cli._sending_arguments, --model-version)."""
    return {
        "version": args.model_version,
        "concurrency": args.concurrency,
        "shared_memory": args.shared_memory,
        "cuda_device": args.cuda_device,
    }


def run_facts(model: str, settings: ConnectionSettings, args: argparse.Namespace) -> dict[str, Any]:
    """What a JSON document or report says first: which model, served how and where, fed --raw or not."""
    return {
        "model": model,
        "protocol": settings.protocol,
        "url": settings.resolved_url(),
        "raw": args.raw,
    }


def check_batch_size(batch_size: int, check: ModelCheck, model: str) -> None:
    """The server rejects requests larger than max_batch_size: say so before sending anything."""
    if batch_size > check.max_batch_size:
        raise UsageError(
            f"--batch-size {batch_size} is larger than model '{model}' accepts (max_batch_size "
            f"{check.max_batch_size}); use --batch-size {check.max_batch_size} or less"
        )


def parse_classification(array: np.ndarray) -> list[list[dict]]:
    """Triton's classification output ([B, k] of b"score:index[:label]") as [{label, index, score}] lists."""
    rows = []
    for row in np.asarray(array, dtype=np.object_).reshape(array.shape[0], -1):
        entries = []
        for cell in row:
            text = cell.decode("utf-8") if isinstance(cell, bytes) else str(cell)
            score, index, *label = text.split(":", 2)
            entries.append(
                {"label": label[0] if label else index, "index": int(index), "score": float(score)}
            )
        rows.append(entries)
    return rows


def first_error(outcomes: Sequence[Outcome]) -> Outcome | None:
    return next((o for o in outcomes if o.error is not None), None)


def failed_summary(outcomes: Sequence[Outcome], describe, noun: str = "items") -> InferenceError | None:
    """One error for all failed requests (each described by `describe(outcome)`), keeping the first's code."""
    failed = [o for o in outcomes if o.error is not None]
    if not failed:
        return None
    lines = [f"  - {describe(o)}: {o.error}" for o in failed[:10]]
    if len(failed) > 10:
        lines.append(f"  ... and {len(failed) - 10} more requests")
    failed_items = sum(o.job.batch_size for o in failed)
    total_items = sum(o.job.batch_size for o in outcomes)
    error = InferenceError(f"{failed_items} of {total_items} {noun} failed:\n" + "\n".join(lines))
    error.exit_code = failed[0].error.exit_code
    return error
