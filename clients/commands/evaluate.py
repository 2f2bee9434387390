"""`eval`: MNIST IDX digits through the deployment; accuracy, confusion matrix, throughput, latency.

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

from clients.commands._common import check_batch_size, chunks
from clients.contracts import MNIST, MNIST_PIPELINE
from clients.errors import EXIT_FAILED, BadInputError
from clients.inputs import bytes_tensor, encode_png, load_dev_digits
from clients.preflight import check_served_model
from clients.runner import Job, OutputSpec, run_jobs
from clients.stats import (
    accuracy,
    confusion_matrix,
    format_accuracy_line,
    format_confusion_matrix,
    summarize_latencies,
)
from clients.triton import ConnectionSettings, TritonClient
from trt_plugin_kit.models import mnist

SPLITS = ("validation", "train", "all")
# What each split is, in the output: only the validation digits were held out from training.
SPLIT_NOTES = {
    "validation": "held out from training: the figure to expect on new digits",
    "train": "digits the model was trained on",
    "all": "7 in 8 of them trained the model: higher than on new digits",
}


def select_digits(count: int, split: str, limit: int | None) -> np.ndarray:
    """Indices of the digits to evaluate: the split of trt_plugin_kit.models.mnist, then the first `limit`."""
    if split == "all":
        indices = np.arange(count)
    else:
        train, validation = mnist.split_indices(count)
        indices = train if split == "train" else validation
    return indices[:limit] if limit is not None else indices


async def run(args: argparse.Namespace, settings: ConnectionSettings) -> int:
    contract = MNIST if args.raw else MNIST_PIPELINE
    model = args.model or contract.name
    input_name, output_name = contract.inputs[0].name, contract.outputs[0].name
    num_classes = contract.outputs[0].shape[0]

    if args.report and not Path(args.report).resolve().parent.is_dir():
        raise BadInputError(f"--report {args.report}: its directory does not exist")
    images, labels = load_dev_digits(args.mnist_dir)
    source = mnist.data_dir(args.mnist_dir)
    indices = select_digits(len(images), args.split, args.limit)
    images, labels = images[indices], labels[indices].astype(np.int64)

    async with TritonClient(settings) as client:
        check = await check_served_model(client, model, contract, args.model_version)
        check_batch_size(args.batch_size, check, model)

        # Inputs are prepared before the clock starts: throughput measures the server, not PNG encoding.
        jobs = []
        for group in chunks(range(len(images)), args.batch_size):
            digits = images[group.start : group.stop]
            if args.raw:
                batch = mnist.to_tensor(digits)
            else:
                batch = bytes_tensor([encode_png(digit) for digit in digits])
            outputs = [OutputSpec(output_name, shape=(len(digits), num_classes), dtype=np.float32)]
            jobs.append(Job({input_name: batch}, outputs, payload=group))

        how = "preprocessed on the client" if args.raw else "PNG-encoded"
        subset = f"{args.split} split{f', first {args.limit}' if args.limit else ''}"
        print(
            f"eval: {len(images)} digits ({subset}) of {source / mnist.DEV_IMAGES_FILE}, {how}, "
            f"through model '{model}' at {client.describe()}"
        )
        print(
            f"      batch size {args.batch_size}, concurrency {args.concurrency}, "
            f"shared memory {args.shared_memory}"
        )
        with tqdm(
            total=len(images), unit="digit", desc="eval", file=sys.stderr, disable=args.no_progress
        ) as bar:
            started = time.perf_counter()
            outcomes = await run_jobs(
                client,
                model,
                jobs,
                version=args.model_version,
                concurrency=args.concurrency,
                shared_memory=args.shared_memory,
                cuda_device=args.cuda_device,
                stop_on_error=True,
                on_done=lambda outcome: bar.update(outcome.job.batch_size),
            )
            elapsed = time.perf_counter() - started

    predictions = np.empty(len(images), dtype=np.int64)
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
        f"throughput: {len(images) / elapsed:.1f} digits/s ({len(outcomes) / elapsed:.1f} requests/s), "
        f"{len(images)} digits in {elapsed:.2f} s"
    )
    print(f"latency per request (ms): {latency.format()}")
    if args.report:
        report = {
            "model": model,
            "protocol": settings.protocol,
            "url": settings.resolved_url(),
            "raw": args.raw,
            "mnist_dir": str(source),
            "split": args.split,
            "digits": len(images),
            "batch_size": args.batch_size,
            "concurrency": args.concurrency,
            "shared_memory": args.shared_memory,
            "accuracy": value,
            "confusion_matrix": matrix.tolist(),
            "elapsed_s": elapsed,
            "throughput_digits_per_s": len(images) / elapsed,
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
    print(f"split: {args.split} ({SPLIT_NOTES[args.split]})")
    print(format_accuracy_line(value))
    return EXIT_FAILED if below else 0
