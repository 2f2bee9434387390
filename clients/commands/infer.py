"""`infer IMAGE...`: top-k digits with labels for image files, through mnist_pipeline or (--raw) mnist."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from clients.commands._common import check_batch_size, chunks, failed_summary, parse_classification
from clients.contracts import MNIST, MNIST_PIPELINE
from clients.errors import UsageError
from clients.inputs import bytes_tensor, expand_image_paths, preprocess_for_mnist, read_images
from clients.preflight import check_served_model
from clients.runner import Job, OutputSpec, run_jobs
from clients.triton import ConnectionSettings, TritonClient


async def run(args: argparse.Namespace, settings: ConnectionSettings) -> int:
    contract = MNIST if args.raw else MNIST_PIPELINE
    model = args.model or contract.name
    output_name = contract.outputs[0].name
    top_k = args.top_k
    if top_k > contract.outputs[0].shape[0]:
        raise UsageError(f"--top-k {top_k}: the model has only {contract.outputs[0].shape[0]} classes")

    # Read and check every file before connecting: a bad file costs nothing on the server.
    images = read_images(expand_image_paths(args.images))
    if args.raw:
        tensors = [preprocess_for_mnist(image) for image in images]

    async with TritonClient(settings) as client:
        check = await check_served_model(client, model, contract, args.model_version)
        check_batch_size(args.batch_size, check, model)
        for warning in check.warnings:
            print(f"warning: {warning}", file=sys.stderr)

        jobs = []
        for group in chunks(range(len(images)), args.batch_size):
            if args.raw:
                inputs = {contract.inputs[0].name: np.stack([tensors[i] for i in group]).astype(np.float32)}
            else:
                inputs = {contract.inputs[0].name: bytes_tensor([images[i].data for i in group])}
            outputs = [OutputSpec(output_name, class_count=top_k)]
            jobs.append(Job(inputs, outputs, payload=[images[i].path for i in group]))
        outcomes = await run_jobs(
            client,
            model,
            jobs,
            version=args.model_version,
            concurrency=args.concurrency,
            shared_memory=args.shared_memory,
            cuda_device=args.cuda_device,
        )

    results = []
    for outcome in outcomes:
        if outcome.error is not None:
            continue
        for path, top in zip(
            outcome.job.payload, parse_classification(outcome.outputs[output_name]), strict=True
        ):
            results.append({"input": str(path), "top_k": top})
    error = failed_summary(outcomes, lambda o: f"images {', '.join(str(p) for p in o.job.payload)}")

    if args.json:
        document = {
            "model": model,
            "protocol": settings.protocol,
            "url": settings.resolved_url(),
            "raw": args.raw,
            "results": results,
            "errors": [] if error is None else [str(o.error) for o in outcomes if o.error is not None],
        }
        print(json.dumps(document, indent=2))
    else:
        for result in results:
            classes = ", ".join(f"{c['label']} ({c['score']:.4f})" for c in result["top_k"])
            print(f"{result['input']}: {classes}")
    if error is not None:
        raise error
    return 0
