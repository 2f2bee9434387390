"""`health`: is the server up and ready, are the models ready, and are they what the clients expect?"""

from __future__ import annotations

import argparse
import json

from clients.contracts import CONTRACTS, check_model
from clients.errors import EXIT_MODEL_UNAVAILABLE, EXIT_OK, EXIT_WRONG_MODEL, UsageError
from clients.preflight import explain_unavailable
from clients.tritonserver import ConnectionSettings, TritonClient


def _tensor_line(tensor: dict, labelled: set[str]) -> str:
    label = " (labels)" if tensor["name"] in labelled else ""
    return f"{tensor['name']} {tensor['datatype']} {tensor['shape']}{label}"


async def _check_one(client: TritonClient, model: str, expect: str | None, version: str) -> dict:
    contract = CONTRACTS.get(expect or model)
    report: dict = {
        "name": model,
        "expected": contract.name if contract else None,
        "problems": [],
        "warnings": [],
    }
    report["ready"] = await client.model_ready(model, version)
    if not report["ready"]:
        report["status"] = "unavailable"
        report["problems"].append(await explain_unavailable(client, model, version))
        return report
    config = await client.model_config(model, version)
    metadata = await client.model_metadata(model, version)
    report["metadata"] = metadata
    report["config"] = {
        "platform": config.get("platform") or config.get("backend", ""),
        "max_batch_size": config["max_batch_size"],
        "dynamic_batching": "dynamic_batching" in config,
        "labels": {t["name"]: t["label_filename"] for t in config["output"] if t["label_filename"]},
    }
    if contract is None:
        report["status"] = "unchecked"
        report["warnings"].append(f"no known interface named '{model}': pass --expect to compare with one")
        return report
    check = check_model(contract, config, metadata)
    report["problems"] += check.problems
    report["warnings"] += check.warnings
    report["status"] = "ok" if check.ok else "wrong_model"
    return report


def _print_text(server: dict, models: list[dict]) -> None:
    state = f"{'live' if server['live'] else 'NOT LIVE'}, {'ready' if server['ready'] else 'NOT READY'}"
    print(f"server: {server['name']} {server['version']} at {server['where']}: {state}")
    print(f"  extensions: {', '.join(server['extensions']) or 'none'}")
    for model in models:
        if not model["ready"]:
            print(f"model {model['name']}: NOT READY")
        else:
            cfg = model["config"]
            versions = ", ".join(model["metadata"].get("versions", [])) or "?"
            print(
                f"model {model['name']}: READY ({cfg['platform']}, versions {versions}, max_batch_size "
                f"{cfg['max_batch_size']}, dynamic batching {'on' if cfg['dynamic_batching'] else 'off'})"
            )
            labelled = set(cfg["labels"])
            print(f"  inputs:  {'; '.join(_tensor_line(t, labelled) for t in model['metadata']['inputs'])}")
            print(f"  outputs: {'; '.join(_tensor_line(t, labelled) for t in model['metadata']['outputs'])}")
        if model["expected"]:
            verdict = "OK" if not model["problems"] else f"{len(model['problems'])} problem(s)"
            print(f"  expected interface '{model['expected']}': {verdict}")
        for problem in model["problems"]:
            print(f"    - {problem}")
        for warning in model["warnings"]:
            print(f"    warning: {warning}")


async def run(args: argparse.Namespace, settings: ConnectionSettings) -> int:
    models = list(dict.fromkeys(args.model or CONTRACTS))
    if args.expect and len(models) != 1:
        raise UsageError("--expect compares one model: give exactly one --model with it")
    async with TritonClient(settings) as client:
        live = await client.server_live()  # raises ServerUnreachableError when nothing answers
        ready = await client.server_ready()
        metadata = await client.server_metadata()
        server = {
            "where": client.describe(),
            "name": metadata.get("name", "triton"),
            "version": metadata.get("version", "?"),
            "extensions": list(metadata.get("extensions", [])),
            "live": live,
            "ready": ready,
        }
        reports = [await _check_one(client, m, args.expect, args.model_version) for m in models]

    exit_code = EXIT_OK
    if not (live and ready):
        exit_code = EXIT_MODEL_UNAVAILABLE
    for report in reports:
        if report["status"] == "unavailable":
            exit_code = max(exit_code, EXIT_MODEL_UNAVAILABLE)
        elif report["status"] == "wrong_model":
            exit_code = max(exit_code, EXIT_WRONG_MODEL)
    if args.json:
        print(json.dumps({"server": server, "models": reports, "ok": exit_code == EXIT_OK}, indent=2))
    else:
        _print_text(server, reports)
        bad = sum(1 for r in reports if r["problems"])
        server_note = "" if live and ready else "server not ready; "
        verdict = f"FAILED ({server_note}{bad} of {len(reports)} models with problems)"
        print("health: OK" if exit_code == EXIT_OK else f"health: {verdict}")
    return exit_code
