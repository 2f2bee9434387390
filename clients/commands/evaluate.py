"""`eval`: labelled digits through the deployment; accuracy, confusion matrix, throughput, latency.

The digits: the shipped MNIST dev digits (default), the standard MNIST IDX files in --mnist-dir, any IDX pair
(--images/--labels), or a folder of pictures with one sub-folder per label (--image-folder). Only the shipped
dev digits (known by content) have a split the model was trained on; for anything else the output says "your
data", and whether any of it is a dev digit the model was trained on, and claims nothing more.

Its last output line is exactly `accuracy: <fraction>` (4 decimals), for scripts and CI. Any failed request
stops the evaluation (with its error and exit code) rather than reporting an accuracy over part of the data.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from clients.commands._common import check_batch_size, chunks, run_facts, sending_options
from clients.contracts import MNIST, MNIST_PIPELINE
from clients.errors import EXIT_FAILED, BadInputError, UsageError
from clients.inputs import LabelledDigits, load_idx_pair, load_labelled_folder, load_mnist_dir
from clients.preflight import check_served_model
from clients.runner import Job, OutputSpec, run_jobs
from clients.stats import (
    accuracy,
    confusion_matrix,
    format_accuracy_line,
    format_confusion_matrix,
    summarize_latencies,
)
from clients.tritonserver import ConnectionSettings, TritonClient
from trt_plugin_kit.models import mnist

SPLITS = ("validation", "train", "all")
# What each split of the shipped dev digits is, in the output: only the validation digits were held out.
SPLIT_NOTES = {
    "validation": "held out from training: the figure to expect on new digits",
    "train": "digits the model was trained on",
    "all": "7 in 8 of them trained the model: higher than on new digits",
}
# The same split of other files under the dev names (the layout `trt-plugin-kit train --mnist-dir` splits):
# true only of a model trained on those very files.
OTHER_DEV_SPLIT_NOTES = {
    "validation": f"digits i % {mnist.VALIDATION_EVERY} == {mnist.VALIDATION_EVERY - 1}",
    "train": f"digits i % {mnist.VALIDATION_EVERY} != {mnist.VALIDATION_EVERY - 1}",
}


def select_digits(count: int, split: str, limit: int | None) -> np.ndarray:
    """Indices of the digits to evaluate: the split of trt_plugin_kit.models.mnist, then the first `limit`."""
    if split == "all":
        indices = np.arange(count)
    else:
        train, validation = mnist.split_indices(count)
        indices = train if split == "train" else validation
    return indices[:limit] if limit is not None else indices


def load_data(args: argparse.Namespace) -> LabelledDigits:
    """The digits the flags name (one source at a time), read and checked before anything is sent."""
    given = [
        flag
        for flag, value in (
            ("--images/--labels", args.images or args.labels),
            ("--image-folder", args.image_folder),
            ("--mnist-dir", args.mnist_dir),
        )
        if value
    ]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one source of digits at a time")
    if bool(args.images) != bool(args.labels):
        raise UsageError("--images and --labels go together: the IDX images and their IDX labels")
    if args.image_folder and args.split in ("validation", "train"):
        raise UsageError(split_refusal(args.split, Path(args.image_folder).name or args.image_folder))
    if args.images:
        return load_idx_pair(args.images, args.labels)
    if args.image_folder:
        return load_labelled_folder(args.image_folder)
    return load_mnist_dir(args.mnist_dir)


def split_refusal(split: str, name: str) -> str:
    return (
        f"--split {split} applies only to the MNIST dev digits (the split the model was trained and "
        f"validated on); {name} is your own data, which eval uses whole (--split all, the default here; "
        "--limit N for the first N)"
    )


def resolve_split(data: LabelledDigits, requested: str | None) -> str:
    """The shipped dev digits: the split asked for, validation by default. Other files under the dev names:
    all of them unless a split is asked for. Anything else: all of it; a train/validation split is refused."""
    if data.shipped:
        return requested or "validation"
    if requested in (None, "all"):
        return "all"
    if data.dev_names:
        return requested
    raise UsageError(split_refusal(requested, data.source.name))


def subset_text(data: LabelledDigits, split: str, limit: int | None) -> str:
    """What the first line says in parentheses about the digits chosen."""
    first = f", first {limit}" if limit else ""
    if data.shipped:
        return f"{split} split{first}"
    return (f"{split} split of your data" if split != "all" else "your data") + first


def split_line(
    data: LabelledDigits, split: str, total: int, chosen: int, overlap: mnist.DevOverlap | None
) -> str:
    """The line before the accuracy: which digits, and what the model knew of them, only where it is known."""
    if data.shipped:
        return f"split: {split} ({SPLIT_NOTES[split]})"
    name = data.source.name
    if split != "all":  # files under the dev names that are not the shipped digits
        return (
            f"split: {split} ({OTHER_DEV_SPLIT_NOTES[split]} of your {name}, not the shipped dev digits: "
            f"{'held out from' if split == 'validation' else 'used in'} training only if the model was "
            "trained on these very files)"
        )
    unit = "images" if data.is_folder else "digits"
    which = f"all {chosen} {unit}" if chosen == total else f"first {chosen} of the {total} {unit}"
    note = "your data"
    if overlap is not None and overlap.train:
        note += (
            f"; {overlap.train} of them are dev digits the model was trained on: expect a higher figure than "
            "on new digits"
        )
    return f"split: {which} of {name} ({note})"


async def run(args: argparse.Namespace, settings: ConnectionSettings) -> int:
    contract = MNIST if args.raw else MNIST_PIPELINE
    model = args.model or contract.name
    input_name, output_name = contract.inputs[0].name, contract.outputs[0].name
    num_classes = contract.outputs[0].dims[0]

    if args.report and not Path(args.report).resolve().parent.is_dir():
        raise BadInputError(f"--report {args.report}: its directory does not exist")
    data = load_data(args)
    split = resolve_split(data, args.split)
    total = len(data)
    data = data.subset(select_digits(total, split, args.limit))
    labels = data.labels
    overlap = None if data.shipped else mnist.dev_digit_overlap(data.as_mnist_digits())

    async with TritonClient(settings) as client:
        check = await check_served_model(client, model, contract, args.model_version)
        check_batch_size(args.batch_size, check, model)

        # Inputs are prepared before the clock starts: throughput measures the server, not PNG encoding.
        jobs = []
        for group in chunks(range(len(data)), args.batch_size):
            if args.raw:
                batch = data.raw_batch(group.start, group.stop)
            else:
                batch = data.encoded_batch(group.start, group.stop)
            outputs = [OutputSpec(output_name, shape=(len(group), num_classes), dtype=np.float32)]
            jobs.append(Job({input_name: batch}, outputs, payload=group))

        if args.raw:
            how = "preprocessed on the client"
        else:
            how = "image files as they are" if data.is_folder else "PNG-encoded"
        unit = "images" if data.is_folder else "digits"
        print(
            f"eval: {len(data)} {unit} ({subset_text(data, split, args.limit)}) of {data.source}, {how}, "
            f"through model '{model}' at {client.describe()}"
        )
        print(
            f"      batch size {args.batch_size}, concurrency {args.concurrency}, "
            f"shared memory {args.shared_memory}"
        )
        with tqdm(
            total=len(data), unit="digit", desc="eval", file=sys.stderr, disable=args.no_progress
        ) as bar:
            started = time.perf_counter()
            outcomes = await run_jobs(
                client,
                model,
                jobs,
                stop_on_error=True,
                on_done=lambda outcome: bar.update(outcome.job.batch_size),
                **sending_options(args),
            )
            elapsed = time.perf_counter() - started

    predictions = np.empty(len(data), dtype=np.int64)
    for outcome in outcomes:
        group = outcome.job.payload
        probabilities = np.asarray(outcome.outputs[output_name]).reshape(len(group), num_classes)
        predictions[group.start : group.stop] = probabilities.argmax(axis=1)
    matrix = confusion_matrix(labels, predictions, num_classes)
    latency = summarize_latencies([o.latency_s for o in outcomes])
    value = accuracy(matrix)

    print("confusion matrix (rows: true digit, columns: predicted digit):")
    print(format_confusion_matrix(matrix))
    print(
        f"throughput: {len(data) / elapsed:.1f} digits/s ({len(outcomes) / elapsed:.1f} requests/s), "
        f"{len(data)} digits in {elapsed:.2f} s"
    )
    print(f"latency per request (ms): {latency.format()}")
    if args.report:
        report = {
            **run_facts(model, settings, args),
            "mnist_dir": None if data.mnist_dir is None else str(data.mnist_dir),
            "images": str(data.source),
            "labels": None if data.labels_source is None else str(data.labels_source),
            "image_folder": data.is_folder,
            "shipped_dev_digits": data.shipped,
            "dev_training_digits": None if overlap is None else overlap.train,
            "split": split,
            "digits": len(data),
            "batch_size": args.batch_size,
            "concurrency": args.concurrency,
            "shared_memory": args.shared_memory,
            "accuracy": value,
            "confusion_matrix": matrix.tolist(),
            "elapsed_s": elapsed,
            "throughput_digits_per_s": len(data) / elapsed,
            "throughput_requests_per_s": len(outcomes) / elapsed,
            "latency": latency.as_dict(),
        }
        try:
            Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
        except OSError as exc:
            raise BadInputError(f"--report {args.report}: cannot write ({exc.strerror})") from exc
        print(f"report written to {args.report}")
    below = args.min_accuracy is not None and value < args.min_accuracy
    if below:
        print(f"error: accuracy {value:.4f} is below --min-accuracy {args.min_accuracy:.4f}", file=sys.stderr)
    print(split_line(data, split, total, len(data), overlap))
    print(format_accuracy_line(value))
    return EXIT_FAILED if below else 0
