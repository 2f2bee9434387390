"""The KServe v2 binary extension as the edge writes it to tritonserver: a JSON header of checked fields, then
every tensor's bytes (https://github.com/kserve/kserve v2 protocol, Triton's binary data extension)."""

from __future__ import annotations

from trt_plugin_kit.serving.edge import wire_json
from trt_plugin_kit.serving.edge.tensors import InferRequest

HEADER_LENGTH = "Inference-Header-Content-Length"


def encode_binary_request(request: InferRequest) -> tuple[bytes, int]:
    """The re-encoding tritonserver receives: a JSON header of checked fields, then every tensor in binary."""
    inputs, chunks = [], []
    for tensor in request.inputs:
        entry = {"name": tensor.name, "datatype": tensor.datatype, "shape": tensor.shape}
        if tensor.raw is None:
            entry["parameters"] = dict(tensor.parameters)
        else:
            entry["parameters"] = {"binary_data_size": len(tensor.raw)}
            chunks.append(tensor.raw)
        inputs.append(entry)
    header: dict = {"inputs": inputs}
    if request.id:
        header["id"] = request.id
    if request.parameters:
        header["parameters"] = request.parameters
    if request.outputs:
        header["outputs"] = [
            {"name": o.name, "parameters": o.parameters} if o.parameters else {"name": o.name}
            for o in request.outputs
        ]
    encoded = wire_json.encode(header)
    return b"".join([encoded, *chunks]), len(encoded)
