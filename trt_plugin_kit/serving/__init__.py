"""Serving the kit's models with NVIDIA Triton: the supervised tritonserver (server), the host probe and
variant choice (host), the command `make serve` runs (cli, ``trt-plugin-kit serve``), the edge in
front of it (edge/), and what runs inside the Python backend (preprocess, python_backend, shm_budget).
"""
