"""`infer IMAGE...`: top-k digits with labels for image files, through mnist_pipeline or (--raw) mnist.

The server answers a batched request as a whole, so one image it rejects (say, a picture with no digit)
fails its whole batch. Such batches are sent again one image per request: the other images still get their
answer and the error names the bad file only.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from clients.commands._common import (
    check_batch_size,
    chunks,
    failed_summary,
    parse_classification,
    run_facts,
    sending_options,
)
from clients.contracts import MNIST, MNIST_PIPELINE
from clients.errors import RejectedInputError, UsageError
from clients.inputs import EncodedImage, bytes_tensor, gather_images, preprocess_all_for_mnist
from clients.preflight import check_served_model
from clients.runner import Job, OutputSpec, run_jobs
from clients.tritonserver import ConnectionSettings, TritonClient


def _make_job(
    indices: list[int], images: list[EncodedImage], tensors: list[np.ndarray] | None, top_k: int
) -> Job:
    """One request for images[indices]: encoded bytes (mnist_pipeline) or preprocessed tensors (mnist)."""
    if tensors is not None:
        inputs = {MNIST.inputs[0].name: np.stack([tensors[i] for i in indices]).astype(np.float32)}
    else:
        inputs = {MNIST_PIPELINE.inputs[0].name: bytes_tensor([images[i].data for i in indices])}
    return Job(inputs, [OutputSpec(MNIST.outputs[0].name, class_count=top_k)], payload=list(indices))


async def run(args: argparse.Namespace, settings: ConnectionSettings) -> int:
    contract = MNIST if args.raw else MNIST_PIPELINE
    model = args.model or contract.name
    output_name = contract.outputs[0].name
    num_classes = contract.outputs[0].dims[0]
    if args.top_k > num_classes:
        raise UsageError(f"--top-k {args.top_k}: the model has only {num_classes} classes")

    # Read and check every file before connecting: a bad file costs nothing on the server.
    images = gather_images(args.images)
    tensors = preprocess_all_for_mnist(images) if args.raw else None

    async with TritonClient(settings) as client:
        check = await check_served_model(client, model, contract, args.model_version)
        check_batch_size(args.batch_size, check, model)
        for warning in check.warnings:
            print(f"warning: {warning}", file=sys.stderr)

        run_options = sending_options(args)
        jobs = [
            _make_job(list(group), images, tensors, args.top_k)
            for group in chunks(range(len(images)), args.batch_size)
        ]
        outcomes = await run_jobs(client, model, jobs, **run_options)

        rejected = [o for o in outcomes if isinstance(o.error, RejectedInputError) and o.job.batch_size > 1]
        if rejected:
            singles = [_make_job([i], images, tensors, args.top_k) for o in rejected for i in o.job.payload]
            retried = {id(o) for o in rejected}
            outcomes = [o for o in outcomes if id(o) not in retried]
            outcomes += await run_jobs(client, model, singles, **run_options)

    answered: dict[int, list[dict]] = {}
    for outcome in outcomes:
        if outcome.error is None:
            for index, top in zip(
                outcome.job.payload, parse_classification(outcome.outputs[output_name]), strict=True
            ):
                answered[index] = top
    results = [{"input": str(images[i].path), "top_k": answered[i]} for i in sorted(answered)]
    outcomes.sort(key=lambda o: o.job.payload[0])
    error = failed_summary(
        outcomes, lambda o: ", ".join(str(images[i].path) for i in o.job.payload), "images"
    )

    if args.json:
        document = {
            **run_facts(model, settings, args),
            "results": results,
            "errors": [
                {"inputs": [str(images[i].path) for i in o.job.payload], "error": str(o.error)}
                for o in outcomes
                if o.error is not None
            ],
        }
        print(json.dumps(document, indent=2))
    else:
        for result in results:
            classes = ", ".join(f"{c['label']} ({c['score']:.4f})" for c in result["top_k"])
            print(f"{result['input']}: {classes}")
    if error is not None:
        raise error
    return 0
