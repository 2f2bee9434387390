"""Python clients for the trt_plugin_kit models on Triton: `python -m clients infer|l2norm|eval|health`.

Library entry points: `clients.tritonserver.TritonClient` (one asyncio client for gRPC and HTTP),
`clients.preflight.check_served_model` (model ready and as expected), `clients.runner.run_jobs`
(concurrent requests, optional shared memory). See clients/README.md.
"""
