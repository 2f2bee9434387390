"""HAProxy in front of N Triton replicas on one host: HTTP/1.1 and HTTP/2 (gRPC), active health checks.

The replicas are those of `docker compose ... up --scale triton-cpu=N` with docker/compose.replicas.yml, each
on the ports of its slot (trt_plugin_kit.deploy.replica_slot). HAProxy (Debian's `haproxy` package) balances
every
request (not every connection) round-robin over the replicas that pass their health check, Triton's
`GET /v2/health/ready` on the replica's HTTP port every `inter`: `fall` failures in a row take a replica out,
`rise` successes put it back. gRPC is balanced per HTTP/2 stream, each call on its own. A request whose
connection to a replica fails is sent to another one (`retries`, `option redispatch`); a request that a
replica dies in the middle of gets an error (502, gRPC UNAVAILABLE) for the client to retry.

    # prints the configuration; with --run, runs HAProxy in the foreground with it
    python -m trt_plugin_kit.deploy.balancer --replicas 3 --base 18000 --http-port 8000 --grpc-port 8001
    python -m trt_plugin_kit.deploy.balancer ... --run
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from trt_plugin_kit.deploy.replica_slot import slot_ports

HTTP_BACKEND, GRPC_BACKEND = "triton_http", "triton_grpc"
HEALTH_PATH = "/v2/health/ready"  # strict readiness: every model of the replica loaded


class BalancerError(RuntimeError):
    pass


@dataclass(frozen=True)
class HealthCheck:
    inter_ms: int = 1000
    fall: int = 2
    rise: int = 2
    timeout_ms: int = 1000

    def detection_bound_s(self) -> float:
        """Longest time from a replica's death to HAProxy taking it out: the check that would have run next
        may start up to one interval later, then `fall` failed checks, each failing within its time-out."""
        return (self.inter_ms * (self.fall + 1) + self.timeout_ms) / 1000.0


def server_name(slot: int) -> str:
    return f"replica{slot}"


def haproxy_config(
    replicas: int,
    base: int,
    http_port: int,
    grpc_port: int,
    stats_socket: Path,
    check: HealthCheck = HealthCheck(),
    host: str = "127.0.0.1",
) -> str:
    http_servers, grpc_servers = [], []
    for slot in range(replicas):
        ports = slot_ports(base, slot)
        name = server_name(slot)
        http_servers.append(f"    server {name} {host}:{ports.http} check")
        # gRPC: cleartext HTTP/2 to the replica; its health is asked on its HTTP port, in HTTP/1.1.
        grpc_servers.append(
            f"    server {name} {host}:{ports.grpc} proto h2 check port {ports.http} check-proto h1"
        )
    lines = [
        "global",
        "    log stdout format raw local0 info",
        f"    stats socket {stats_socket} mode 600 level admin",
        "    maxconn 4096",
        "",
        "defaults",
        "    mode http",
        "    log global",
        "    option httplog",
        "    option dontlognull",
        "    timeout connect 1s",
        "    timeout client 60s",
        "    timeout server 60s",
        f"    timeout check {check.timeout_ms}ms",
        # A failed connection is tried again, on another replica: nothing was sent yet.
        "    retries 2",
        "    option redispatch 1",
        f"    default-server inter {check.inter_ms}ms fall {check.fall} rise {check.rise}",
        "",
        "frontend inference_http",
        f"    bind {host}:{http_port}",
        f"    default_backend {HTTP_BACKEND}",
        "",
        "frontend inference_grpc",
        f"    bind {host}:{grpc_port} proto h2",
        f"    default_backend {GRPC_BACKEND}",
        "",
        f"backend {HTTP_BACKEND}",
        "    balance roundrobin",
        f"    option httpchk GET {HEALTH_PATH}",
        "    http-check expect status 200",
        *http_servers,
        "",
        f"backend {GRPC_BACKEND}",
        "    balance roundrobin",
        f"    option httpchk GET {HEALTH_PATH}",
        "    http-check expect status 200",
        *grpc_servers,
        "",
    ]
    return "\n".join(lines)


def find_haproxy() -> str:
    binary = shutil.which("haproxy") or next(
        (str(p) for p in (Path("/usr/sbin/haproxy"),) if p.is_file()), None
    )
    if binary is None:
        raise BalancerError("haproxy not found: apt-get install haproxy (bash .ci/run does)")
    return binary


class Balancer:
    """HAProxy running on a generated configuration; a context manager. `stats()` reads its server table."""

    def __init__(self, replicas: int, base: int, http_port: int, grpc_port: int, log_file: Path,
                 check: HealthCheck = HealthCheck()):  # fmt: skip
        self.workdir = Path(tempfile.mkdtemp(prefix="trt_plugin_kit_haproxy_"))
        self.stats_socket = self.workdir / "stats.sock"
        self.config_file = self.workdir / "haproxy.cfg"
        self.config_file.write_text(
            haproxy_config(replicas, base, http_port, grpc_port, self.stats_socket, check)
        )
        self.log_file, self.check, self.replicas = log_file, check, replicas
        self.http_port, self.grpc_port = http_port, grpc_port
        self.process: subprocess.Popen | None = None
        self._log = None

    def __enter__(self) -> Balancer:
        haproxy = find_haproxy()
        checked = subprocess.run(
            [haproxy, "-c", "-q", "-f", str(self.config_file)], capture_output=True, text=True
        )
        if checked.returncode != 0:
            raise BalancerError(f"haproxy rejects {self.config_file}: {checked.stderr.strip()}")
        self._log = self.log_file.open("ab")
        # -db: foreground, logs on stdout. Own session: a Ctrl-C meant for the caller is not HAProxy's.
        self.process = subprocess.Popen(
            [haproxy, "-db", "-f", str(self.config_file)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not self.stats_socket.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise BalancerError(f"haproxy did not start; see {self.log_file}")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc_info) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def command(self, line: str) -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(self.stats_socket))
            sock.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def stats(self) -> dict[tuple[str, str], dict[str, str]]:
        """{(backend, server): row of `show stat`} for the replicas (status, stot, hrsp_5xx, ...)."""
        text = self.command("show stat").lstrip("# ")
        rows = csv.DictReader(text.splitlines())
        return {
            (row["pxname"], row["svname"]): row
            for row in rows
            if row["pxname"] in (HTTP_BACKEND, GRPC_BACKEND) and row["svname"] not in ("BACKEND", "FRONTEND")
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, required=True)
    parser.add_argument("--base", type=int, required=True, help="the replicas' slot base port (replica_slot)")
    parser.add_argument("--http-port", type=int, default=8000, help="where the balancer takes HTTP")
    parser.add_argument("--grpc-port", type=int, default=8001, help="where the balancer takes gRPC")
    parser.add_argument("--run", action="store_true", help="run HAProxy in the foreground (Ctrl-C stops)")
    args = parser.parse_args(argv)
    if not args.run:
        print(
            haproxy_config(
                args.replicas, args.base, args.http_port, args.grpc_port, Path("/tmp/haproxy.sock")
            )
        )
        return 0
    with Balancer(args.replicas, args.base, args.http_port, args.grpc_port, Path("/dev/stdout")) as balancer:
        print(f"HAProxy on 127.0.0.1:{args.http_port} (HTTP) and :{args.grpc_port} (gRPC)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            balancer.process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
