"""Give each of N identical replicas on one host's network its own ports, then run the server.

`docker compose up --scale triton-cpu=3` starts three identical containers. On the host's network (traffic on
loopback, no bridge) they cannot all bind 8000-8002, and a load balancer needs to know where each one is.
So each replica takes the first free *slot* k of a folder shared by the replicas (an exclusive `flock` on
``<dir>/slot-k``, held by the server process for its whole life) and serves on

    HTTP  base + 10k,   gRPC  base + 10k + 1,   metrics  base + 10k + 2

A replica that dies releases its slot with its last open file; the one that replaces it (the restart policy)
takes the lowest free slot: its own again. trt_plugin_kit.deploy.balancer writes a HAProxy configuration with
a
server per slot, so the balancer finds the replicas where they are.

    python -m trt_plugin_kit.deploy.replica_slot --dir /run/trt-slots --base 18000 -- trt-plugin-kit serve

The ports go to the command as TRITON_HTTP_PORT, TRITON_GRPC_PORT and TRITON_METRICS_PORT (what serve.py
reads) and REPLICA_SLOT; --http-port-file also writes the HTTP port there, for a container's healthcheck.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import random
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

SLOT_STRIDE = 10  # ports between two slots' HTTP ports


@dataclass(frozen=True)
class SlotPorts:
    slot: int
    http: int
    grpc: int
    metrics: int


def slot_ports(base: int, slot: int) -> SlotPorts:
    http = base + SLOT_STRIDE * slot
    return SlotPorts(slot, http, http + 1, http + 2)


def _ephemeral_port_range() -> tuple[int, int]:
    """The ports the kernel hands to outgoing connections and to bind(port 0) (Linux's default elsewhere)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_slot_base(replicas: int, host: str = "127.0.0.1", attempts: int = 50) -> int:
    """A base port whose `replicas` slots are all free on `host` now: every port of the block is bound once
    to check. The block is drawn below the kernel's ephemeral range: inside it, a busy machine's outgoing
    connections and their TIME_WAIT ends leave few runs of free ports (a test run found none in 50 draws),
    and could take a port between this check and the replica's bind. Raises OSError when none was found."""
    size = SLOT_STRIDE * replicas
    low, high = _ephemeral_port_range()
    # Above the ephemeral range instead where it starts too low to leave room below it.
    first, last = (10000, low - size) if low - size > 10000 else (high + 1, 65535 - size)
    draw = random.Random()
    for _ in range(attempts):
        base = draw.randrange(first, last)
        sockets = []
        try:
            for port in range(base, base + size):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise OSError(f"no {size} consecutive free ports found on {host} for {replicas} replica slots")


def acquire_slot(directory: Path, slots: int) -> tuple[int, int]:
    """(slot, file descriptor holding its lock); the descriptor stays open across exec."""
    directory.mkdir(parents=True, exist_ok=True)
    for slot in range(slots):
        descriptor = os.open(directory / f"slot-{slot}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            continue
        os.set_inheritable(descriptor, True)
        return slot, descriptor
    raise SystemExit(f"replica_slot: all {slots} slots in {directory} are taken; raise --slots")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="folder shared by the replicas (a volume)")
    parser.add_argument("--base", type=int, required=True, help="HTTP port of slot 0")
    parser.add_argument("--slots", type=int, default=8, help="replicas at most (8)")
    parser.add_argument("--http-port-file", type=Path, help="write the slot's HTTP port to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --: the server's command line")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the server's command after --")
    slot, _descriptor = acquire_slot(args.dir, args.slots)
    ports = slot_ports(args.base, slot)
    env = dict(
        os.environ,
        REPLICA_SLOT=str(slot),
        TRITON_HTTP_PORT=str(ports.http),
        TRITON_GRPC_PORT=str(ports.grpc),
        TRITON_METRICS_PORT=str(ports.metrics),
    )
    if args.http_port_file:
        args.http_port_file.write_text(f"{ports.http}\n")
    print(
        f"replica_slot: slot {slot}: HTTP {ports.http}, gRPC {ports.grpc}, metrics {ports.metrics}",
        flush=True,
    )
    os.execvpe(command[0], command, env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
