"""The compiled gRPC front (edge/native/grpc_edge.cc): started, fed and supervised from here.

grpcio's server costs about 260 us of CPU per call in Python, more than the whole budget of the edge; the
binary answers ModelInfer itself (parsed, checked, re-encoded, forwarded to tritonserver) and relays every
other allowed method to the Python front (:class:`GrpcFront`), which then listens on a private Unix socket
only. Everything the binary knows is written to its stdin from here (the limits, the allowed names and
datatypes, the methods, the sockets and, once tritonserver is ready, the models' interfaces): the facts
keep their one home in Python. It writes "listening PORT" once bound, then "fail MODEL" for a model whose
request failed upstream (the edge's health probe takes over). When it dies, it is started again; when the
edge ends, its stdin closes and it stops.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import numpy as np

from trt_plugin_kit.interface import GRPC_ADMIN_HEADER, REPO_ROOT
from trt_plugin_kit.serving.edge import limits, policy
from trt_plugin_kit.serving.edge.contract import NATIVE_GRPC_ENV
from trt_plugin_kit.serving.edge.tensors import (
    DATATYPE_BYTES,
    NAME,
    OUTPUT_PARAMETERS,
    REQUEST_PARAMETERS,
    SHM_PARAMETERS,
    VERSION,
    ModelInterface,
)

log = logging.getLogger("trt_plugin_kit.serving.edge")
BINARY_NAME = "trt-plugin-kit-edge-grpc"
DEFAULT_BINARY = REPO_ROOT / "build" / "edge-native" / BINARY_NAME
START_TIMEOUT_S = 10.0
RESTART_DELAYS_S = (0.1, 0.5, 1.0, 2.0)  # after the binary died, growing while it keeps dying


def native_binary() -> Path | None:
    """The built binary, or None (then the Python front serves gRPC). ``$TRT_PLUGIN_KIT_EDGE_GRPC``: its
    path, or "off" for the Python front."""
    chosen = os.environ.get(NATIVE_GRPC_ENV, "")
    if chosen.lower() == "off":
        return None
    path = Path(chosen) if chosen else DEFAULT_BINARY
    return path if path.is_file() and os.access(path, os.X_OK) else None


def configuration(
    listen: str, upstream: str, relay: str, relayed: list[str], tls: dict[str, Path | bool] | None = None
) -> str:
    """The binary's first stdin block: ``key value`` lines, then ``end``."""
    numbers = {
        "max_request_bytes": limits.MAX_REQUEST_BYTES,
        "max_grpc_message_bytes": limits.MAX_GRPC_MESSAGE_BYTES,
        "max_dimension": limits.MAX_DIMENSION,
        "max_inputs": limits.MAX_INPUTS,
        "max_outputs": limits.MAX_OUTPUTS,
        "max_id_length": limits.MAX_ID_LENGTH,
        "max_parameters": limits.MAX_PARAMETERS,
        "max_shape_dims": limits.MAX_SHAPE_DIMS,
        "upstream_timeout_ms": int(limits.UPSTREAM_TIMEOUT_S * 1000),
        "header_timeout_ms": int(limits.HEADER_TIMEOUT_S * 1000),
        "body_timeout_ms": int(limits.BODY_TIMEOUT_S * 1000),
        "max_grpc_concurrent_rpcs": limits.MAX_GRPC_CONCURRENT_RPCS,
        "max_grpc_streams_per_connection": limits.MAX_GRPC_STREAMS_PER_CONNECTION,
        "max_grpc_metadata_bytes": limits.MAX_GRPC_METADATA_BYTES,
        "answer_timeout_ms": int(limits.ANSWER_TIMEOUT_S * 1000),
        "handshake_timeout_ms": int(limits.HANDSHAKE_TIMEOUT_S * 1000),
        "idle_timeout_ms": int(limits.IDLE_TIMEOUT_S * 1000),
        "max_grpc_concurrent_rpcs_per_peer": limits.MAX_GRPC_CONCURRENT_RPCS_PER_PEER,
        "max_grpc_connections": limits.MAX_GRPC_CONNECTIONS,
        "max_grpc_connections_per_peer": limits.MAX_CONNECTIONS_PER_PEER,
        "grpc_buffer_bytes": limits.BUFFER_BYTES,
        "grpc_buffer_bytes_per_connection": limits.GRPC_BUFFER_BYTES_PER_CONNECTION,
        "grpc_buffer_bytes_per_peer": limits.BUFFER_BYTES_PER_PEER,
        "grpc_inflate_pending": limits.GRPC_INFLATE_PENDING,
    }
    lines = [f"limit {key} {value}" for key, value in numbers.items()]
    lines += [f"name_pattern {NAME.pattern}", f"version_pattern {VERSION.pattern}"]
    lines += [f"datatype {name} {size or 0}" for name, size in DATATYPE_BYTES.items()]
    lines += [
        f"contents {name} {field} {np.dtype(kind).name}" for name, (field, kind) in policy.CONTENTS.items()
    ]
    for where, allowed in (
        ("request", REQUEST_PARAMETERS),
        ("input", SHM_PARAMETERS),
        ("output", OUTPUT_PARAMETERS),
    ):
        lines += [f"parameter {where} {key} {kind.__name__}" for key, kind in allowed.items()]
    lines += [f"relay_method {method}" for method in relayed]
    lines += [
        f"service {policy.SERVICE}",
        f"listen {listen}",
        f"upstream {upstream}",
        f"relay {relay}",
        f"admin_header {GRPC_ADMIN_HEADER}",
        f"unreachable {policy.UNREACHABLE}",
        f"concurrent_refusal {policy.CONCURRENT_REFUSAL}",
        f"peer_calls_refusal {policy.PEER_CALLS_REFUSAL}",
        f"busy_refusal {policy.BUSY_REFUSAL}",
        f"compression_refusal {policy.COMPRESSION_REFUSAL}",
    ]
    lines += [f"refusal {key} {text}" for key, text in policy.REFUSALS.items()]
    if tls:
        lines += [
            f"tls_cert {tls['cert']}",
            f"tls_key {tls['key']}",
            f"tls_mutual {int(bool(tls['mutual']))}",
        ]
        if tls.get("root"):
            lines.append(f"tls_root {tls['root']}")
    return "\n".join(lines) + "\nend\n"


def models_block(models: dict[str, ModelInterface]) -> str:
    """The served models' interfaces, a block the binary swaps in whole."""
    lines = []
    for model in models.values():
        names = [model.name, *model.inputs, *model.outputs]
        if not all(NAME.fullmatch(name) for name in names):  # one word each on the line
            log.warning(
                "model %r has a name the native gRPC front cannot take; it refuses the model", model.name
            )
            continue
        lines.append(f"model {model.name} {model.max_batch_size} {' '.join(sorted(model.versions))}")
        lines += [
            f"input {s.name} {s.datatype} {' '.join(map(str, s.dims))}".rstrip()
            for s in model.inputs.values()
        ]
        lines += [f"output {name}" for name in sorted(model.outputs)]
    return "\n".join(lines + ["end"]) + "\n"


class NativeGrpcFront:
    """One supervised binary on the public gRPC port."""

    def __init__(self, binary: Path, config: str, on_failure):
        self.binary = binary
        self.config = config
        self.on_failure = on_failure  # callback(model): a ModelInfer failed upstream
        self.models = "end\n"
        self.process: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self._stopping = False
        self._supervisor: asyncio.Task | None = None
        self._reader: asyncio.Task | None = None

    async def start(self) -> None:
        """Start the binary and wait until it listens; OSError with its reason if it cannot."""
        await self._spawn()
        self._supervisor = asyncio.get_running_loop().create_task(self._supervise())

    async def _spawn(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            str(self.binary), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        self.process.stdin.write(self.config.encode() + self.models.encode())
        try:
            first = await asyncio.wait_for(self.process.stdout.readline(), START_TIMEOUT_S)
        except asyncio.TimeoutError:
            first = b"error it did not start within %d s" % START_TIMEOUT_S
        word, _, rest = first.decode(errors="replace").strip().partition(" ")
        if word != "listening":
            await self._end(self.process)
            raise OSError(rest or f"it exited with {self.process.returncode}")
        self._reader = asyncio.get_running_loop().create_task(self._read(self.process))

    async def _read(self, process) -> None:
        while line := await process.stdout.readline():
            word, _, rest = line.decode(errors="replace").strip().partition(" ")
            if word == "fail" and rest:
                self.on_failure(rest)
            elif word == "error":
                log.error("native gRPC front: %s", rest)

    async def _supervise(self) -> None:
        while not self._stopping:
            code = await self.process.wait()
            if self._stopping:
                return
            delay = RESTART_DELAYS_S[min(self.restarts, len(RESTART_DELAYS_S) - 1)]
            self.restarts += 1
            log.error("the native gRPC front exited (%s); starting it again in %.1f s", code, delay)
            await asyncio.sleep(delay)
            try:
                await self._spawn()
            except OSError as error:
                log.error("the native gRPC front did not start again: %s", error)

    def set_models(self, models: dict[str, ModelInterface]) -> None:
        self.models = models_block(models)
        if self.process is not None and self.process.returncode is None:
            self.process.stdin.write(self.models.encode())

    async def stop(self) -> None:
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
        if self.process is not None:
            await self._end(self.process)
        if self._reader is not None:
            self._reader.cancel()

    @staticmethod
    async def _end(process) -> None:
        if process.returncode is None:
            process.stdin.close()  # its signal to stop
            try:
                await asyncio.wait_for(process.wait(), 3)
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()
