"""Replicas on one host behind HAProxy, without Docker or a server: slots
(trt_plugin_kit.deploy.replica_slot), the
generated HAProxy configuration (trt_plugin_kit.deploy.balancer, checked by haproxy itself), and the compose
override
that ties them to `--scale`. With real replicas: tests/server/test_balancer_replicas.py; the failover under
load runs in the compose test (loadtests/studies/failover.py).
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trt_plugin_kit.deploy.balancer import haproxy_config, server_name
from trt_plugin_kit.deploy.replica_slot import SLOT_STRIDE, free_slot_base, slot_ports
from trt_plugin_kit.interface import REPO_ROOT

needs_haproxy = pytest.mark.skipif(
    shutil.which("haproxy") is None, reason="no haproxy (apt-get install haproxy; bash .ci/run does)"
)


def start_slot_holder(directory: Path, base: int) -> subprocess.Popen:
    """A process that takes a slot and then sleeps, printing the environment it was given."""
    code = (
        "import os, time; print(os.environ['REPLICA_SLOT'], os.environ['TRITON_HTTP_PORT'], flush=True); "
        "time.sleep(60)"
    )
    return subprocess.Popen(
        [sys.executable, "-m", "trt_plugin_kit.deploy.replica_slot", f"--dir={directory}", f"--base={base}",
         "--slots=2", "--", sys.executable, "-c", code],
        stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
    )  # fmt: skip


def held(process: subprocess.Popen) -> list[str]:
    """(slot, HTTP port) the command was given, after the wrapper's own line."""
    wrapper_line = process.stdout.readline()
    assert wrapper_line.startswith("replica_slot: slot "), wrapper_line
    return process.stdout.readline().split()


def test_replicas_take_distinct_slots_and_a_dead_ones_slot_is_taken_again(tmp_path):
    first = start_slot_holder(tmp_path, 20000)
    assert held(first) == ["0", "20000"]
    second = start_slot_holder(tmp_path, 20000)
    try:
        assert held(second) == ["1", str(20000 + SLOT_STRIDE)]
        third = subprocess.run(
            [sys.executable, "-m", "trt_plugin_kit.deploy.replica_slot", f"--dir={tmp_path}", "--base=20000",
             "--slots=2", "--", "true"],
            capture_output=True, text=True, cwd=REPO_ROOT,
        )  # fmt: skip
        assert third.returncode != 0 and "all 2 slots" in third.stderr  # both held: refused, said why
        first.kill()  # a replica dies: its slot is free again (the lock went with its last open file)
        first.wait()
        replacement = start_slot_holder(tmp_path, 20000)
        try:
            assert held(replacement) == ["0", "20000"]
        finally:
            replacement.kill()
            replacement.wait()
    finally:
        second.kill()
        second.wait()
        first.kill()
        first.wait()


@needs_haproxy
def test_haproxy_accepts_the_generated_configuration(tmp_path):
    config = tmp_path / "haproxy.cfg"
    config.write_text(haproxy_config(3, 18000, 8000, 8001, tmp_path / "stats.sock"))
    checked = subprocess.run(["haproxy", "-c", "-f", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    text = config.read_text()
    for slot in range(3):
        ports = slot_ports(18000, slot)
        assert f"server {server_name(slot)} 127.0.0.1:{ports.http} check" in text
        assert f"127.0.0.1:{ports.grpc} proto h2 check port {ports.http} check-proto h1" in text
    assert "option httpchk GET /v2/health/ready" in text and "bind 127.0.0.1:8001 proto h2" in text


def test_compose_replicas_override_fits_the_image_and_the_slots():
    override = yaml.safe_load((REPO_ROOT / "docker" / "compose.replicas.yml").read_text())
    service = override["services"]["triton-cpu"]
    command = service["command"]
    assert command[:3] == ["python", "-m", "trt_plugin_kit.deploy.replica_slot"]
    assert command[command.index("--") + 1 :] == ["trt-plugin-kit", "serve"]  # the image's own command
    port_file = next(arg.split("=", 1)[1] for arg in command if arg.startswith("--http-port-file="))
    slots_dir = next(arg.split("=", 1)[1] for arg in command if arg.startswith("--dir="))
    assert port_file.startswith("/tmp/") and port_file in " ".join(service["healthcheck"]["test"])
    (volume,) = service["volumes"]
    name, mount = volume.split(":")
    assert mount == slots_dir
    # The slots volume belongs to the image's unprivileged user, who takes the locks.
    options = override["volumes"][name]["driver_opts"]["o"]
    dockerfile = (REPO_ROOT / "docker" / "python.Dockerfile").read_text()
    uid = re.search(r"--uid (\d+)", dockerfile)[1]
    assert f"uid={uid}" in options and options.startswith("size=")


def test_free_slot_base_gives_a_block_of_ports_free_now():
    """Each slot's ports follow the base, so every port of the block is checked; the block lies outside the
    kernel's ephemeral range, where outgoing connections left no 20 free ports in a row in 50 draws during a
    test run (and could take one before the replica binds it)."""
    base = free_slot_base(2)
    low, high = (int(port) for port in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert base + 2 * SLOT_STRIDE <= low or base > high
    sockets = []
    try:
        for port in range(base, base + 2 * SLOT_STRIDE):
            sock = socket.socket()
            sockets.append(sock)
            sock.bind(("127.0.0.1", port))
    finally:
        for sock in sockets:
            sock.close()
    with pytest.raises(OSError, match="no 20 consecutive free ports"):
        free_slot_base(2, attempts=0)
