"""Serving the kit's models with NVIDIA Triton: the supervised tritonserver (server), the host probe and
variant choice (host), the command `make serve` runs (cli, ``python -m trt_plugin_kit.serving``), the edge in
front of it (edge/), and what runs inside the Python backend (preprocess, python_backend, shm_budget).
"""
