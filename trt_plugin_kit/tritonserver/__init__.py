"""Talking to Triton Inference Server (the server; OpenAI Triton, the kernel language, is triton_aot.py's and
plugins/*/kernel.py's): the KServe v2 requests and readiness wait over both protocols (protocol), model
configurations read and checked (config), and the endpoint options every tool shares (options: --host, the
ports, --protocol, --url, and the TRITON_* variables behind them)."""
