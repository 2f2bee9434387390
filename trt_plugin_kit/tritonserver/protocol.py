"""What every tool that talks to Triton shares: one request builder, one readiness wait, and the recognition
of a protocol/port mix-up.

tritonclient's blocking and asyncio clients take the same InferInput / InferRequestedOutput classes, so the
one builder here serves the asyncio clients (clients/tritonserver.py), the Locust users
(loadtests/locustfile.py) and the soak (loadtests/soak/). tritonclient is imported only when it is used:
Locust must switch gRPC to gevent before any gRPC channel exists.
"""

from __future__ import annotations

import difflib
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trt_plugin_kit.interface import MODEL_NAMES, repository_models
from trt_plugin_kit.tritonserver.options import DEFAULT_PORTS, PORT_FLAGS, ServerLocation, format_address

PROTOCOL_NAMES = {"http": "HTTP", "grpc": "gRPC"}


# ----------------------------------------------------------------------------------------------- models
@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a served model as Triton's configuration states it: the clients' contracts
    (clients/contracts.py) and the edge's model interfaces (serving/edge/tensors.py) both say what a model
    takes in these terms."""

    name: str
    datatype: str  # KServe's name: FP32, BYTES, ...
    dims: tuple[int, ...]  # one item's (no batch dimension); -1 = any size
    labels: bool = False  # outputs: a labels file is expected (the classification extension)


# --------------------------------------------------------------------------------------------------- requests
@dataclass
class InputTensor:
    """One request input: the data itself, or where it already lies in a registered shared memory region."""

    name: str
    shape: list[int]
    datatype: str
    data: np.ndarray | None = None
    shm_region: str | None = None
    shm_byte_size: int = 0

    @classmethod
    def from_numpy(cls, name: str, array: np.ndarray) -> InputTensor:
        return cls(name, list(array.shape), triton_dtype(array), data=array)


@dataclass
class OutputRequest:
    """One requested output. class_count > 0 asks for Triton's classification extension (top-k labels)."""

    name: str
    class_count: int = 0
    shm_region: str | None = None
    shm_byte_size: int = 0


def client_module(protocol: str) -> Any:
    """tritonclient.http or tritonclient.grpc (their asyncio clients use the same request classes)."""
    if protocol == "http":
        import tritonclient.http as module
    elif protocol == "grpc":
        import tritonclient.grpc as module
    else:
        raise ValueError(f"unknown protocol {protocol!r}")
    return module


def triton_dtype(array: np.ndarray) -> str:
    """Triton's datatype name of an array; NumPy object arrays (Python bytes) are BYTES."""
    from tritonclient.utils import np_to_triton_dtype

    return "BYTES" if array.dtype == np.object_ else np_to_triton_dtype(array.dtype)


def build_request(
    protocol: str,
    inputs: Mapping[str, np.ndarray] | Sequence[InputTensor],
    outputs: Sequence[str | OutputRequest] = (),
) -> tuple[list, list]:
    """(InferInput list, InferRequestedOutput list) for one request over `protocol`.

    HTTP sends tensors with the binary tensor extension (raw bytes after a JSON header): JSON would need every
    BYTES element to be UTF-8 text, which encoded images are not."""
    module = client_module(protocol)
    if isinstance(inputs, Mapping):
        inputs = [InputTensor.from_numpy(name, array) for name, array in inputs.items()]
    infer_inputs = []
    for tensor in inputs:
        infer_input = module.InferInput(tensor.name, list(tensor.shape), tensor.datatype)
        if tensor.shm_region is not None:
            infer_input.set_shared_memory(tensor.shm_region, tensor.shm_byte_size)
        elif protocol == "http":
            infer_input.set_data_from_numpy(tensor.data, binary_data=True)
        else:
            infer_input.set_data_from_numpy(tensor.data)
        infer_inputs.append(infer_input)
    requested = []
    for output in outputs:
        output = OutputRequest(output) if isinstance(output, str) else output
        extra = {"binary_data": True} if protocol == "http" else {}
        requested_output = module.InferRequestedOutput(output.name, class_count=output.class_count, **extra)
        if output.shm_region is not None:
            requested_output.set_shared_memory(output.shm_region, output.shm_byte_size)
        requested.append(requested_output)
    return infer_inputs, requested


def read_outputs(result: Any, outputs: Sequence[str | OutputRequest]) -> dict[str, np.ndarray]:
    """The requested outputs that came back in the reply, by name (not those written to shared memory;
    a missing output is left out, for the caller's check to report)."""
    arrays = {}
    for output in outputs:
        output = OutputRequest(output) if isinstance(output, str) else output
        if output.shm_region is None:
            array = result.as_numpy(output.name)
            if array is not None:
                arrays[output.name] = array
    return arrays


class Connection:
    """A blocking connection to one endpoint (Locust users under gevent, the soak's worker threads)."""

    def __init__(self, protocol: str, address: str, timeout_s: float):
        self.protocol = protocol
        self.timeout_s = timeout_s
        module = client_module(protocol)
        if protocol == "http":
            self.client = module.InferenceServerClient(
                address, connection_timeout=timeout_s, network_timeout=timeout_s
            )
        else:
            self.client = module.InferenceServerClient(address)

    def infer(
        self, model: str, inputs: Mapping[str, np.ndarray], outputs: Sequence[str] = ()
    ) -> dict[str, np.ndarray]:
        """Runs one inference; returns the outputs by name (all of the model's when none are named)."""
        infer_inputs, requested = build_request(self.protocol, inputs, outputs)
        extra = {"client_timeout": self.timeout_s} if self.protocol == "grpc" else {}
        result = self.client.infer(model, infer_inputs, outputs=requested or None, **extra)
        return read_outputs(result, outputs)

    def close(self) -> None:
        self.client.close()


# ------------------------------------------------------------------------------------------- protocol mix-ups
def probe_protocol(host: str, port: int, timeout_s: float = 2.0) -> str | None:
    """Which of Triton's protocols answers on host:port: "http", "grpc" (an HTTP/2 server, which opens with
    a SETTINGS frame), or None (closed, silent or something else)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(
                f"GET /v2/health/live HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
            )
            data = sock.recv(64)
    except OSError:
        return None
    if data.startswith(b"HTTP/"):
        return "http"
    if len(data) >= 9 and data[3] == 0x04:  # HTTP/2 frame header: 3 bytes length, type 4 = SETTINGS
        return "grpc"
    return None


def wrong_protocol_message(protocol: str, host: str, port: int, *, fixed_ports: bool = False) -> str | None:
    """A sentence for a port that speaks the other protocol than the one used on it; None if it does not.

    `fixed_ports`: the tool uses both ports (load tests), so the hint is about the two port options."""
    spoken = probe_protocol(host, port)
    if spoken is None or spoken == protocol:
        return None
    address = format_address(host, port)
    used, answered = PROTOCOL_NAMES[protocol], PROTOCOL_NAMES[spoken]
    flag, variable = PORT_FLAGS[protocol]
    message = f"{address} speaks {answered}, not {used}"
    if spoken == "http" and port != DEFAULT_PORTS["http"]:
        message += " (Triton's HTTP port, or its metrics port)"
    if fixed_ports:
        other_flag = PORT_FLAGS[spoken][0]
        return (
            f"{message}. Are {flag} and {other_flag} swapped? Triton's {used} port is {flag} / ${variable} "
            f"(default {DEFAULT_PORTS[protocol]})."
        )
    return (
        f"{message}. Talk {answered} to it (--protocol {spoken}, or --url {spoken}://{address}), or give "
        f"Triton's {used} port: {flag} PORT or ${variable} (default {DEFAULT_PORTS[protocol]})."
    )


# --------------------------------------------------------------------------------------------- shared memory
# Triton refuses to unregister a region that a request still holds ("Cannot unregister shared memory region
# 'x', it is currently in use."): a request its client gave up on, or one whose release on the server trails
# its answer. Asked again once that request is done, it unregisters; a client that does not ask again leaves
# the region registered on the server for good.
REGION_IN_USE = "it is currently in use"
REGION_RELEASE_WAIT_S = 10.0  # how long a client keeps asking before it leaves a region registered
REGION_RETRY_S = 0.05


def region_in_use(error: BaseException) -> bool:
    """Whether `error` is Triton's refusal to unregister a region that a request still holds."""
    return REGION_IN_USE in str(error)


# ------------------------------------------------------------------------------------------------- readiness
class NotReady(Exception):
    """The server did not become ready in time (or cannot: wrong port, exited); the message says why."""

    def __init__(self, message: str, waited_out: bool = False):
        super().__init__(message)
        self.waited_out = waited_out  # True: nothing answered in time (False: a mix-up, or the server exited)


class ModelsNotServed(NotReady):
    """The server is ready but a model asked for is not: with strict readiness (every server of the kit) it
    is not served there, which waiting does not change."""


def candidate_models() -> list[str]:
    """Names a server of the kit may serve: the kit's models and this checkout's model_repository/ folders
    (models of yours); the administrative index that would list them all needs the admin key."""
    return list(dict.fromkeys([*MODEL_NAMES, *repository_models()]))


def unknown_model_hint(model: str, ready: Sequence[str]) -> str:
    """What to say of a model the server does not serve: the closest ready name first (a typo), then all."""
    close = difflib.get_close_matches(model, list(ready), n=1, cutoff=0.6)
    listed = ", ".join(ready) or "none"
    return (f"did you mean '{close[0]}'? " if close else "") + (
        f"models ready there (of the kit's and this checkout's model_repository/): {listed}"
    )


def _check_ready(location: ServerLocation, protocol: str, models: Sequence[str]) -> tuple[str | None, dict]:
    """(problem or None, server metadata) for one protocol; raises when the server does not answer."""
    module = client_module(protocol)
    address = location.address(protocol)
    if protocol == "http":
        client = module.InferenceServerClient(address, connection_timeout=5, network_timeout=5)
        timeout: dict = {}
    else:
        client = module.InferenceServerClient(address)
        timeout = {"client_timeout": 5}
    try:
        if not client.is_server_ready(**timeout):
            return f"{PROTOCOL_NAMES[protocol]}: server not ready", {}
        not_ready = [m for m in models if not client.is_model_ready(m, **timeout)]
        if not_ready:
            ready = [
                m for m in candidate_models() if m not in not_ready and client.is_model_ready(m, **timeout)
            ]
            raise ModelsNotServed(
                f"Triton at {location.describe()} is ready but does not serve "
                f"{', '.join(repr(m) for m in not_ready)}; {unknown_model_hint(not_ready[0], ready)}"
            )
        metadata = client.get_server_metadata(**({"as_json": True} if protocol == "grpc" else {}))
        return None, dict(metadata)
    finally:
        client.close()


def wait_until_ready(
    location: ServerLocation,
    *,
    models: Sequence[str] = (),
    protocols: Sequence[str] = ("http", "grpc"),
    timeout_s: float = 30.0,
    poll_s: float = 0.5,
    stopped: Callable[[], str | None] | None = None,
) -> dict:
    """Waits until the server answers ready over every protocol in `protocols` and every model is ready;
    returns the server metadata (name, version, extensions).

    Raises NotReady after timeout_s with the last problem seen, at once when a port speaks the other protocol
    (waiting does not fix that), or when `stopped()` returns a reason (e.g. the server process exited)."""
    deadline = time.monotonic() + timeout_s
    problem = "not tried"
    while True:
        if stopped is not None and (reason := stopped()):
            raise NotReady(reason)
        metadata: dict = {}
        for protocol in protocols:
            try:
                found, answer = _check_ready(location, protocol, models)
            except ModelsNotServed:
                raise
            except Exception as error:  # noqa: BLE001 - any failure means "not up yet"; reported if it lasts
                mixup = wrong_protocol_message(
                    protocol, location.host, location.port(protocol), fixed_ports=len(protocols) > 1
                )
                if mixup:
                    raise NotReady(mixup) from None
                found = f"{PROTOCOL_NAMES[protocol]}: {type(error).__name__}: {error}"
            if found:
                problem = found
                break
            metadata = metadata or answer
        else:
            return metadata
        if time.monotonic() >= deadline:
            raise NotReady(
                f"no ready Triton server at {location.describe()} after {timeout_s:g} s ({problem})",
                waited_out=True,
            )
        time.sleep(poll_s)
