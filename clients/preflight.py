"""Checks made before a command sends any data: server reachable, model ready, model is the expected one."""

from __future__ import annotations

from clients.contracts import ModelCheck, ModelContract, check_model
from clients.errors import (
    ClientError,
    ModelUnavailableError,
    RequestTimeoutError,
    ServerUnreachableError,
    WrongModelError,
)
from clients.tritonserver import TritonClient
from trt_plugin_kit.tritonserver.protocol import candidate_models, unknown_model_hint


async def explain_unavailable(client: TritonClient, model: str, version: str = "") -> str:
    """Why a model is not ready: not served at all, loading, or failed (with the reason when the repository
    index can be read; servers from `make serve` keep the index for --admin-key holders)."""
    where = client.describe()
    label = f"'{model}'" + (f" version {version}" if version else "")
    try:
        index = await client.repository_index()
    except (ServerUnreachableError, RequestTimeoutError):
        raise
    except ClientError:
        return await _explain_without_index(client, model, version, label)
    entries = [e for e in index if e["name"] == model and (not version or e["version"] in ("", version))]
    if not entries:
        known = ", ".join(f"{e['name']} ({e['state'] or 'unknown state'})" for e in index) or "none"
        return f"model {label} is not served by Triton at {where}. Models in its repository: {known}"
    details = "; ".join(
        f"version {e['version'] or '?'}: {e['state'] or 'not loaded'}"
        + (f" ({e['reason']})" if e["reason"] else "")
        for e in entries
    )
    return f"model {label} is in the repository of Triton at {where} but not ready: {details}"


async def _explain_without_index(client: TritonClient, model: str, version: str, label: str) -> str:
    """Model metadata needs no key and tells "unknown model" from "known but not ready"."""
    where = client.describe()
    try:
        await client.model_metadata(model, version)
    except ModelUnavailableError as exc:
        if "not found" in str(exc).lower() or "unknown model" in str(exc).lower():
            ready = [name for name in candidate_models() if name != model and await client.model_ready(name)]
            return f"model {label} is not found on Triton at {where}; {unknown_model_hint(model, ready)}"
    return (
        f"model {label} is known to Triton at {where} but not ready; the repository index would say why "
        "(it needs the server's admin key: --admin-key or $TRITON_ADMIN_KEY)"
    )


async def check_served_model(
    client: TritonClient, model: str, contract: ModelContract, version: str = ""
) -> ModelCheck:
    """Raises ServerUnreachableError / ModelUnavailableError / WrongModelError, else returns the check."""
    if not await client.server_live():
        raise ServerUnreachableError(f"Triton at {client.describe()} answers but reports itself not live")
    if not await client.model_ready(model, version):
        raise ModelUnavailableError(await explain_unavailable(client, model, version))
    config = await client.model_config(model, version)
    metadata = await client.model_metadata(model, version)
    check = check_model(contract, config, metadata)
    if not check.ok:
        listed = "\n".join(f"  - {p}" for p in check.problems)
        raise WrongModelError(
            f"model '{model}' on Triton at {client.describe()} is not what this command expects "
            f"('{contract.name}': {contract.summary}):\n{listed}\n"
            f"Check --model; `python -m clients health --model {model}` shows what the server has."
        )
    return check
