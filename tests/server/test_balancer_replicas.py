"""HAProxy (trt_plugin_kit.deploy.balancer) in front of two real Triton replicas: every request, HTTP/1.1 and
gRPC,
balanced on its own. The failover under load runs in the compose test (loadtests/studies/failover.py).
"""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from trt_plugin_kit.deploy.balancer import GRPC_BACKEND, HTTP_BACKEND, Balancer, server_name
from trt_plugin_kit.deploy.replica_slot import free_slot_base, slot_ports
from trt_plugin_kit.interface import L2NORM, L2NORM_INPUT
from trt_plugin_kit.serving.host import Ports, free_port
from trt_plugin_kit.serving.server import TritonServer

needs_haproxy = pytest.mark.skipif(
    shutil.which("haproxy") is None, reason="no haproxy (apt-get install haproxy; bash .ci/run does)"
)


@needs_haproxy
def test_every_request_is_balanced_over_real_replicas_on_both_protocols(tmp_path):
    base = free_slot_base(2)
    replicas = []
    try:
        for slot in range(2):
            ports = slot_ports(base, slot)
            server = TritonServer(
                variant="cpu",
                ports=Ports(ports.http, ports.grpc, ports.metrics),
                log_file=tmp_path / f"replica{slot}.log",
                exit_timeout_s=3,
            )
            replicas.append(server)
            server.start()
        for server in replicas:
            server.wait_until_ready(180)
        http_port, grpc_port = free_port(), free_port()
        with Balancer(2, base, http_port, grpc_port, tmp_path / "haproxy.log") as balancer:
            deadline = time.monotonic() + 20
            while not all(row["status"] == "UP" for row in balancer.stats().values()):
                assert time.monotonic() < deadline, balancer.stats()
                time.sleep(0.2)
            vectors = np.ones((2, 16), dtype=np.float32)
            http = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
            grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
            for _ in range(10):  # one client connection each: balancing is per request, not per connection
                for module, client in ((httpclient, http), (grpcclient, grpc)):
                    request = module.InferInput(L2NORM_INPUT, list(vectors.shape), "FP32")
                    request.set_data_from_numpy(vectors)
                    client.infer(L2NORM, [request])
            http.close()
            grpc.close()
            stats = balancer.stats()
        for backend in (HTTP_BACKEND, GRPC_BACKEND):
            assert [int(stats[(backend, server_name(s))]["stot"]) for s in range(2)] == [5, 5], backend
    finally:
        for server in replicas:
            server.stop()
