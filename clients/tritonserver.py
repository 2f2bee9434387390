"""One asyncio client for Triton over gRPC or HTTP, with the differences of the two tritonclient APIs hidden.

`TritonClient` wraps `tritonclient.grpc.aio` / `tritonclient.http.aio` so that the commands are written once:
the same method names, metadata and config as plain dicts with integer shapes, every failure turned into a
`clients.errors.ClientError` with a message a person understands, and bounded retries (exponential backoff)
on connection errors and gRPC UNAVAILABLE. Every call of this API is idempotent (health, metadata,
stateless inference), so a retry is safe even when a dropped connection had delivered the first attempt.
Timeouts are not retried: the request may still be running, and more load does not help a slow server.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tritonclient.utils import InferenceServerException

from clients.errors import (
    AccessDeniedError,
    BadInputError,
    ClientError,
    InferenceError,
    ModelUnavailableError,
    RejectedInputError,
    RequestTimeoutError,
    ServerUnreachableError,
    UsageError,
    WrongProtocolError,
)
from trt_plugin_kit.interface import (
    ADMIN_KEY_ENV,
    DEFAULT_GRPC_PORT,
    DEFAULT_HOST,
    DEFAULT_HTTP_PORT,
    admin_header,
)
from trt_plugin_kit.tritonserver.options import Endpoint, format_address, parse_url
from trt_plugin_kit.tritonserver.protocol import (
    PROTOCOL_NAMES,
    InputTensor,
    OutputRequest,
    build_request,
    read_outputs,
    wrong_protocol_message,
)

log = logging.getLogger("clients")

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 3
# First retry after 0.25 s, then 0.5, 1, 2, ... capped: a server that is restarting gets a few seconds.
BACKOFF_FIRST_S = 0.25
BACKOFF_MAX_S = 4.0


@dataclass(frozen=True)
class ConnectionSettings:
    """Everything needed to reach one Triton endpoint; built from the common command-line flags."""

    protocol: str = "grpc"
    url: str = ""  # HOST:PORT; empty: 127.0.0.1 and Triton's default port of the protocol
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    headers: dict[str, str] = field(default_factory=dict)
    ssl: bool = False
    root_certificates: str | None = None
    private_key: str | None = None
    certificate_chain: str | None = None
    insecure: bool = False  # HTTPS only: skip certificate verification
    verbose: bool = False

    @classmethod
    def for_endpoint(cls, endpoint: Endpoint, **settings) -> ConnectionSettings:
        return cls(protocol=endpoint.protocol, url=endpoint.address, **settings)

    def resolved_url(self) -> str:
        """HOST:PORT, the form tritonclient takes."""
        default_port = DEFAULT_GRPC_PORT if self.protocol == "grpc" else DEFAULT_HTTP_PORT
        return self.url or format_address(DEFAULT_HOST, default_port)

    def describe(self) -> str:
        return f"{self.resolved_url()} over {PROTOCOL_NAMES[self.protocol]}{' (TLS)' if self.ssl else ''}"

    @property
    def sends_admin_key(self) -> bool:
        return admin_header(self.protocol) in self.headers


# ----------------------------------------------------------------------------------------- normalization
def _as_int_list(values: Any) -> list[int]:
    # gRPC's JSON form writes int64 as strings ("-1"); HTTP gives ints.
    return [int(v) for v in (values or [])]


def normalize_metadata(metadata: dict) -> dict:
    """Model metadata with integer shapes, the same for both protocols."""
    out = dict(metadata)
    for key in ("inputs", "outputs"):
        out[key] = [
            {
                "name": t.get("name", ""),
                "datatype": t.get("datatype", ""),
                "shape": _as_int_list(t.get("shape")),
            }
            for t in metadata.get(key, [])
        ]
    return out


def normalize_config(config: dict) -> dict:
    """Model config with integer dims and defaults filled in (gRPC's JSON omits default-valued fields)."""
    if "config" in config and isinstance(config["config"], dict):  # gRPC wraps it in ModelConfigResponse
        config = config["config"]
    out = dict(config)
    out["max_batch_size"] = int(config.get("max_batch_size", 0) or 0)
    for key in ("input", "output"):
        tensors = []
        for t in config.get(key, []):
            tensor = dict(t)
            tensor["dims"] = _as_int_list(t.get("dims"))
            tensor["data_type"] = t.get("data_type", "TYPE_INVALID")
            tensor["label_filename"] = t.get("label_filename", "") or ""
            tensor["optional"] = bool(t.get("optional", False))
            tensors.append(tensor)
        out[key] = tensors
    return out


# ------------------------------------------------------------------------------------------------ client
class TritonClient:
    """Async Triton client for one endpoint. Use as `async with TritonClient(settings) as client:`."""

    def __init__(self, settings: ConnectionSettings):
        self.settings = settings
        self.url = settings.resolved_url()
        self._client: Any = None

    @property
    def protocol(self) -> str:
        return self.settings.protocol

    def describe(self) -> str:
        return self.settings.describe()

    # -- lifecycle
    async def __aenter__(self) -> TritonClient:
        self._client = self._connect()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def _connect(self) -> Any:
        s = self.settings
        for flag, path in (
            ("--root-certificates", s.root_certificates),
            ("--private-key", s.private_key),
            ("--certificate-chain", s.certificate_chain),
        ):
            if path is not None:
                try:
                    with open(path, "rb"):
                        pass
                except OSError as exc:
                    raise BadInputError(f"cannot read {flag} {path}: {exc.strerror}") from exc
        if s.protocol == "grpc":
            if s.insecure:
                raise UsageError(
                    "--insecure works with --protocol http only (tritonclient's gRPC always verifies)"
                )
            import tritonclient.grpc.aio as grpcaio  # one protocol's stack per run: a CLI call starts faster

            return grpcaio.InferenceServerClient(
                self.url,
                verbose=s.verbose,
                ssl=s.ssl,
                root_certificates=s.root_certificates,
                private_key=s.private_key,
                certificate_chain=s.certificate_chain,
            )
        ssl_context = None
        if s.ssl:
            ssl_context = ssl.create_default_context(cafile=s.root_certificates)
            if s.certificate_chain:
                ssl_context.load_cert_chain(s.certificate_chain, keyfile=s.private_key)
            if s.insecure:
                ssl_context.check_hostname = False
                ssl_context.verify_mode = ssl.CERT_NONE
        import tritonclient.http.aio as httpaio

        return httpaio.InferenceServerClient(
            self.url, verbose=s.verbose, conn_timeout=s.timeout_s, ssl=s.ssl, ssl_context=ssl_context
        )

    # -- error handling and retries
    def _translate(self, exc: BaseException, what: str) -> ClientError:
        """Turns whatever the tritonclient/aiohttp/grpc stack raised into a ClientError for a person."""
        where = self.describe()
        timeout_hint = (
            f"no answer from Triton at {where} within {self.settings.timeout_s:g} s (--timeout) "
            f"while {what}; the server may be overloaded or the model slow: raise --timeout, "
            "or lower --concurrency/--batch-size"
        )
        unreachable = f"cannot reach Triton at {where}: is the server running? (make serve)"
        if isinstance(exc, ClientError):
            return exc
        detail = str(exc.message() if isinstance(exc, InferenceServerException) else exc).lower()
        # Nothing listening is no TLS problem, whatever the flags (aiohttp's message names "ssl:default" even
        # for a plain-HTTP connection that was refused).
        refused = any(word in detail for word in ("connection refused", "connect call failed"))
        tls_words = ("handshake", "ssl", "tls", "certificate")
        if not refused and (
            self.settings.ssl or any(w in detail.replace("ssl:default", "") for w in tls_words)
        ):
            unreachable += (
                "\n  TLS: check --ssl, --root-certificates (the CA of the server's certificate) and, "
                "if the server wants client certificates, --private-key/--certificate-chain"
            )
        if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
            return RequestTimeoutError(timeout_hint)
        status = str(exc.status() or "") if isinstance(exc, InferenceServerException) else ""
        message = str(exc.message() or exc) if isinstance(exc, InferenceServerException) else str(exc)
        # Restricted APIs: HTTP answers 403, gRPC UNAVAILABLE, both with "... is restricted ...". Checked
        # before UNAVAILABLE, so that a refusal is never retried as if the server were down.
        if isinstance(exc, InferenceServerException) and "restricted" in message.lower():
            return AccessDeniedError(self._admin_key_advice(what, message))
        # aiohttp is loaded only where an HTTP client was made; without it no exception can be one of its own.
        aiohttp = sys.modules.get("aiohttp")
        http_errors = (aiohttp.ClientError,) if aiohttp else ()
        http_connection_errors = (aiohttp.ClientConnectionError,) if aiohttp else ()
        connection_failed = status == "StatusCode.UNAVAILABLE" or (
            isinstance(exc, (*http_errors, ConnectionError)) and not isinstance(exc, InferenceServerException)
        )
        if connection_failed:
            mixup = None if self.settings.ssl else self._wrong_protocol()
            if mixup:
                return WrongProtocolError(f"{what}: {mixup}")
            if status or isinstance(exc, (*http_connection_errors, ConnectionError)):
                return ServerUnreachableError(f"{unreachable}\n  ({message})")
            return InferenceError(f"{what}: HTTP client error talking to {where}: {exc}")
        if isinstance(exc, InferenceServerException):
            if status == "StatusCode.DEADLINE_EXCEEDED":
                return RequestTimeoutError(timeout_hint)
            lowered = message.lower()
            if "unknown model" in lowered or status == "StatusCode.NOT_FOUND":
                return ModelUnavailableError(f"{what}: {message} (server {where})")
            if "is not ready" in lowered or "no available versions" in lowered:
                return ModelUnavailableError(f"{what}: {message} (server {where})")
            if status in ("StatusCode.INVALID_ARGUMENT", "400"):
                return RejectedInputError(f"{what}: the server rejected the input: {message}")
            return InferenceError(f"{what}: the server answered with an error: {message}")
        return InferenceError(f"{what}: unexpected {type(exc).__name__}: {exc}")

    def _wrong_protocol(self) -> str | None:
        """The mix-up sentence when the port speaks the other protocol (probed once per client)."""
        if not hasattr(self, "_mixup"):
            _, host, port, _ = parse_url(self.url)
            self._mixup = wrong_protocol_message(self.protocol, host, port)
        return self._mixup

    def _admin_key_advice(self, what: str, message: str) -> str:
        where = self.describe()
        if self.settings.sends_admin_key:
            return (
                f"{what}: Triton at {where} refused the admin key this client sent ({message}). "
                f"--admin-key / ${ADMIN_KEY_ENV} must be the key the server was started with."
            )
        return (
            f"{what}: Triton at {where} keeps this API for clients with its admin key ({message}). "
            f"Give the key the server was started with: --admin-key KEY or ${ADMIN_KEY_ENV}. A server from "
            f"`make serve` started without ${ADMIN_KEY_ENV} keeps these APIs closed to every client: restart "
            f"it as `{ADMIN_KEY_ENV}=<secret> make serve` and give the clients the same {ADMIN_KEY_ENV}."
        )

    async def _call(self, what: str, method: str, *args, retry: bool = True, **kwargs) -> Any:
        """Calls self._client.<method>, retrying (bounded, exponential backoff) only when unreachable."""
        if self._client is None:
            raise RuntimeError("TritonClient used outside `async with`")
        if self.settings.headers:
            kwargs["headers"] = dict(self.settings.headers)
        if self.protocol == "grpc":
            kwargs["client_timeout"] = self.settings.timeout_s  # HTTP: the session's total timeout
        retries = self.settings.retries if retry else 0
        delay = BACKOFF_FIRST_S
        for attempt in range(retries + 1):
            try:
                return await getattr(self._client, method)(*args, **kwargs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - everything is translated, nothing swallowed
                error = self._translate(exc, what)
                if not isinstance(error, ServerUnreachableError) or attempt == retries:
                    raise error from exc
            log.warning(
                "%s; retry %d of %d in %.2f s", str(error).splitlines()[0], attempt + 1, retries, delay
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
        raise AssertionError("unreachable")  # the loop always returns or raises

    # -- health and metadata
    async def server_live(self) -> bool:
        return bool(await self._call("checking server liveness", "is_server_live"))

    async def server_ready(self) -> bool:
        return bool(await self._call("checking server readiness", "is_server_ready"))

    async def server_metadata(self) -> dict:
        kwargs = {"as_json": True} if self.protocol == "grpc" else {}
        return await self._call("reading server metadata", "get_server_metadata", **kwargs)

    async def model_ready(self, model: str, version: str = "") -> bool:
        return bool(
            await self._call(f"checking whether model '{model}' is ready", "is_model_ready", model, version)
        )

    async def model_metadata(self, model: str, version: str = "") -> dict:
        kwargs = {"as_json": True} if self.protocol == "grpc" else {}
        raw = await self._call(
            f"reading metadata of model '{model}'", "get_model_metadata", model, version, **kwargs
        )
        return normalize_metadata(raw)

    async def model_config(self, model: str, version: str = "") -> dict:
        kwargs = {"as_json": True} if self.protocol == "grpc" else {}
        raw = await self._call(
            f"reading config of model '{model}'", "get_model_config", model, version, **kwargs
        )
        return normalize_config(raw)

    async def repository_index(self) -> list[dict]:
        """Models the server knows: [{'name', 'version', 'state', 'reason'}], '' where unknown."""
        kwargs = {"as_json": True} if self.protocol == "grpc" else {}
        raw = await self._call("reading the model repository index", "get_model_repository_index", **kwargs)
        entries = raw.get("models", []) if isinstance(raw, dict) else raw
        return [
            {
                "name": e.get("name", ""),
                "version": str(e.get("version", "")),
                "state": e.get("state", ""),
                "reason": e.get("reason", ""),
            }
            for e in entries or []
        ]

    # -- shared memory
    async def register_system_shared_memory(self, name: str, key: str, byte_size: int) -> None:
        await self._call(
            f"registering system shared memory region '{name}'",
            "register_system_shared_memory",
            name,
            key,
            byte_size,
        )

    async def unregister_system_shared_memory(self, name: str) -> None:
        await self._call(
            f"unregistering system shared memory region '{name}'",
            "unregister_system_shared_memory",
            name,
            retry=False,
        )

    async def register_cuda_shared_memory(
        self, name: str, raw_handle: bytes, device_id: int, byte_size: int
    ) -> None:
        await self._call(
            f"registering CUDA shared memory region '{name}'",
            "register_cuda_shared_memory",
            name,
            raw_handle,
            device_id,
            byte_size,
        )

    async def unregister_cuda_shared_memory(self, name: str) -> None:
        await self._call(
            f"unregistering CUDA shared memory region '{name}'",
            "unregister_cuda_shared_memory",
            name,
            retry=False,
        )

    # -- inference
    async def infer(
        self, model: str, inputs: list[InputTensor], outputs: list[OutputRequest], version: str = ""
    ) -> dict[str, np.ndarray]:
        """Runs one request; returns {output name: array} (outputs written to shared memory are left out)."""
        infer_inputs, requested = build_request(self.protocol, inputs, outputs)
        result = await self._call(
            f"running inference on model '{model}'",
            "infer",
            model,
            infer_inputs,
            model_version=version,
            outputs=requested,
        )
        # Outputs placed in shared memory have no data in the reply (HTTP's as_numpy would fail on them).
        return read_outputs(result, outputs)
