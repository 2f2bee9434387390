"""`l2norm [INPUT]`: vectors from .npy / CSV / stdin through the l2norm model; prints or saves the result."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from clients.commands._common import check_batch_size, chunks, sending_options
from clients.contracts import L2NORM
from clients.errors import BadInputError, UsageError
from clients.inputs import load_vectors, save_vectors
from clients.preflight import check_served_model
from clients.runner import Job, OutputSpec, run_jobs
from clients.tritonserver import ConnectionSettings, TritonClient


async def run(args: argparse.Namespace, settings: ConnectionSettings) -> int:
    if args.source == "-" and sys.stdin.isatty():
        raise UsageError("no INPUT given and stdin is a terminal: pass a .npy/CSV file or pipe vectors in")
    vectors = load_vectors(args.source)
    input_name, output_name = L2NORM.inputs[0].name, L2NORM.outputs[0].name

    async with TritonClient(settings) as client:
        check = await check_served_model(client, args.model, L2NORM, args.model_version)
        check_batch_size(args.batch_size, check, args.model)
        (length,) = check.input_shapes.get(input_name, (-1,))
        if length != -1 and vectors.shape[1] != length:
            raise BadInputError(
                f"model '{args.model}' takes vectors of length {length}, "
                f"the input has length {vectors.shape[1]}"
            )
        jobs = []
        for group in chunks(range(len(vectors)), args.batch_size):
            batch = vectors[group.start : group.stop]
            jobs.append(
                Job({input_name: batch}, [OutputSpec(output_name, shape=batch.shape, dtype=np.float32)])
            )
        # All or nothing: a partial result would misalign rows, so the first failure stops the run.
        outcomes = await run_jobs(client, args.model, jobs, stop_on_error=True, **sending_options(args))

    normalized = np.concatenate(
        [o.outputs[output_name].reshape(len(o.job.inputs[input_name]), -1) for o in outcomes]
    )
    if args.output:
        save_vectors(args.output, normalized)
        print(f"wrote {len(normalized)} normalized vectors of length {normalized.shape[1]} to {args.output}")
    elif args.json:
        print(json.dumps({"model": args.model, "normalized": normalized.tolist()}))
    else:
        for row in normalized:
            print(",".join(f"{value:.9g}" for value in row))
    return 0
