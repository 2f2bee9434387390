"""`tensor --model NAME [DATA]`: any model's tensors, from what the server says about the model.

The inputs come from DATA (.npy for a one-input model, .npz with one array per input name, items along the
first axis), from `--input NAME=FILE.npy` per input, or are generated (`--generate N` items uniform in
`--range LOW:HIGH`); they are checked against the model's metadata (names, datatypes, shapes) before anything
is sent, and sent in batches of --batch-size. The outputs are printed (text or --json) or saved with
`--output FILE` (.npz: one array per output; .npy: the model's one output).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from clients.commands._common import chunks, sending_options
from clients.errors import BadInputError, ModelUnavailableError, ServerUnreachableError, UsageError
from clients.preflight import explain_unavailable
from clients.runner import Job, OutputSpec, run_jobs
from clients.tritonserver import ConnectionSettings, TritonClient
from trt_plugin_kit.tritonserver.model_io import (
    ModelDataError,
    ModelIO,
    check_inputs,
    generate_inputs,
    read_inputs,
)


def _inputs(args: argparse.Namespace, io: ModelIO) -> dict[str, np.ndarray]:
    sources = sum(bool(s) for s in (args.data, args.input, args.generate))
    if sources != 1:
        raise UsageError(
            "give the inputs one way: DATA (.npy/.npz), --input NAME=FILE.npy ..., or --generate N"
        )
    try:
        if args.data:
            return read_inputs(io, args.data)
        if args.input:
            arrays = {}
            for name, path in args.input:
                if not path.endswith(".npy"):
                    raise ModelDataError(f"--input {name}={path}: give a .npy file")
                try:
                    arrays[name] = np.load(path, allow_pickle=False)
                except (OSError, ValueError) as error:
                    raise ModelDataError(f"{path}: not a readable .npy file ({error})") from error
            check_inputs(io, arrays)
            return arrays
        low, high = args.range
        return generate_inputs(io, args.generate if io.batching else 1, low, high, args.dim, args.seed)
    except ModelDataError as error:
        raise BadInputError(f"{error}\n{io.describe()}") from error


def _save(path: str, outputs: dict[str, np.ndarray]) -> None:
    if path.endswith(".npz"):
        np.savez(path, **outputs)
    elif path.endswith(".npy"):
        if len(outputs) != 1:
            raise UsageError(f"the model has {len(outputs)} outputs: --output FILE.npz holds them all")
        np.save(path, next(iter(outputs.values())))
    else:
        raise UsageError(f"--output {path}: give a .npy or .npz file")


async def run(args: argparse.Namespace, settings: ConnectionSettings) -> int:
    async with TritonClient(settings) as client:
        if not await client.server_live():
            raise ServerUnreachableError(f"Triton at {client.describe()} answers but reports itself not live")
        if not await client.model_ready(args.model, args.model_version):
            raise ModelUnavailableError(await explain_unavailable(client, args.model, args.model_version))
        io = ModelIO.from_server(
            await client.model_metadata(args.model, args.model_version),
            await client.model_config(args.model, args.model_version),
        )
        inputs = _inputs(args, io)
        if io.batching and args.batch_size > io.max_batch_size:
            raise UsageError(
                f"--batch-size {args.batch_size} is larger than model '{args.model}' accepts (max_batch_size "
                f"{io.max_batch_size}); use --batch-size {io.max_batch_size} or less"
            )
        items = len(next(iter(inputs.values()))) if io.batching else 1
        jobs = []
        for group in chunks(range(items), args.batch_size if io.batching else 1):
            feeds = {n: a[group.start : group.stop] for n, a in inputs.items()} if io.batching else inputs
            outputs = [
                OutputSpec(t.name, shape=(len(group), *t.dims) if io.batching and min(t.dims, default=0) >= 0
                           else None, dtype=t.dtype)
                for t in io.outputs
            ]  # fmt: skip
            jobs.append(Job(feeds, outputs))
        # All or nothing: a partial result would misalign items, so the first failure stops the run.
        outcomes = await run_jobs(client, args.model, jobs, stop_on_error=True, **sending_options(args))
    names = [t.name for t in io.outputs]
    results = {
        name: np.concatenate([o.outputs[name] for o in outcomes])
        if io.batching
        else outcomes[0].outputs[name]
        for name in names
    }
    if args.output:
        _save(args.output, results)
        shapes = ", ".join(f"{n} {list(a.shape)} {a.dtype}" for n, a in results.items())
        print(f"wrote {Path(args.output).name}: {shapes} ({items} item(s) through '{args.model}')")
    elif args.json:
        print(json.dumps({"model": args.model, "outputs": {n: a.tolist() for n, a in results.items()}}))
    else:
        with np.printoptions(precision=8, threshold=1_000_000, linewidth=110):
            for name, array in results.items():
                print(f"{name} {array.dtype} {list(array.shape)}:")
                print(np.array2string(array, separator=", "))
    return 0
