"""The edge's Python gRPC front on its own, for test_edge_budgets.py: what serves gRPC where the compiled
front is not built. Run as a script; reads one JSON object on stdin (listen address, tritonserver's gRPC
socket, limits to shorten, the models' interfaces), prints "listening ADDRESS" once serving, and stops when
stdin closes. The front, its options and its budgets are the edge's own (GrpcFront); only what stands
behind it is the test's.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile

from trt_plugin_kit.serving.edge import limits
from trt_plugin_kit.serving.edge.grpc_front import GrpcFront
from trt_plugin_kit.serving.edge.tensors import ModelInterface
from trt_plugin_kit.serving.edge.upstream import Upstream
from trt_plugin_kit.tritonserver.protocol import TensorSpec


async def serve(config: dict) -> None:
    for name, value in config.get("limits", {}).items():
        setattr(limits, name, value)
    upstream = Upstream(tempfile.gettempdir(), "unused")
    upstream.paths["grpc"] = config["upstream"]
    upstream.models = {
        name: ModelInterface(
            name,
            model["max_batch_size"],
            {
                tensor: TensorSpec(tensor, datatype, tuple(dims))
                for tensor, (datatype, dims) in model["inputs"].items()
            },
            frozenset(model["outputs"]),
        )
        for name, model in config["models"].items()
    }
    front = GrpcFront(upstream, None)
    await front.open()
    server = front.server()
    if not server.add_insecure_port(config["listen"]):
        raise SystemExit(f"cannot listen on {config['listen']}")
    await server.start()
    print("listening", config["listen"], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until stdin closes
    await server.stop(grace=1)
    await front.close()


if __name__ == "__main__":
    asyncio.run(serve(json.loads(sys.stdin.readline())))
