"""Static checks of docker-compose.yml and docker/ (no Docker engine or GPU on the CI machines).

What is checked is what breaks silently on a GPU host: images of two different TensorRT versions, a
LD_PRELOAD path where the builder never writes, ports or healthcheck pointing elsewhere than Triton listens,
triton starting before the builder succeeded, hardening flags lost.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from trt_plugin_kit.serving import ADMIN_HEADER, RESTRICTED_APIS

REPO_ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
DOCKER_DIR = REPO_ROOT / "docker"

# TensorRT carried by NVIDIA's NGC containers per release (NVIDIA Frameworks Support Matrix). The tensorrt
# and tritonserver images of one release carry the same TensorRT. Extend when moving the pin.
NGC_RELEASE_TENSORRT = {
    "25.08": "10.13.2",
    "25.09": "10.13.3",
    "25.10": "10.13.3",
}
IMAGE_PATTERN = re.compile(r"^nvcr\.io/nvidia/(?P<name>tensorrt|tritonserver):(?P<release>\d\d\.\d\d)-py3$")
# "${VAR:-default}" as docker compose interpolates it when VAR is unset.
INTERPOLATION = re.compile(r"\$\{(?P<var>\w+)(?::-(?P<default>[^}]*))?\}")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def interpolate_defaults(text: str) -> str:
    return INTERPOLATION.sub(lambda match: match.group("default") or "", text)


def flags(command: list[str]) -> dict[str, str]:
    """`--name=value` items of a command list as {name: value}."""
    return dict(item[2:].split("=", 1) for item in command if item.startswith("--") and "=" in item)


def service_env(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict), "use the mapping form for environment"
    return {key: str(value) for key, value in env.items()}


def test_compose_file_parses_and_has_the_three_services(compose):
    assert set(compose["services"]) == {"builder", "triton", "loadtest"}
    assert compose["services"]["loadtest"]["profiles"] == ["loadtest"]
    assert "profiles" not in compose["services"]["triton"]  # plain `docker compose up` starts it


def test_both_images_are_pinned_to_one_ngc_release_with_the_declared_tensorrt(compose):
    release = compose["x-ngc-release"]
    images = {}
    for key in ("tensorrt-image", "tritonserver-image"):
        match = IMAGE_PATTERN.match(release[key])
        assert match, f"{key} {release[key]!r} is not an nvcr.io/nvidia/<tensorrt|tritonserver>:YY.MM-py3 tag"
        images[match["name"]] = match["release"]
    assert images["tensorrt"] == images["tritonserver"], f"TensorRT of the two images differs: {images}"
    assert images["tensorrt"] in NGC_RELEASE_TENSORRT, f"release {images['tensorrt']} missing from the table"
    assert release["tensorrt-version"] == NGC_RELEASE_TENSORRT[images["tensorrt"]]


def test_services_build_from_the_pinned_images_and_check_the_version(compose):
    release, services = compose["x-ngc-release"], compose["services"]
    builds = {
        "builder": ("TENSORRT_IMAGE", release["tensorrt-image"]),
        "triton": ("TRITONSERVER_IMAGE", release["tritonserver-image"]),
    }
    for name, (arg, image) in builds.items():
        build = services[name]["build"]
        assert build["args"][arg] == image
        dockerfile = (REPO_ROOT / build["context"] / build["dockerfile"]).read_text()
        assert f"ARG {arg}" in dockerfile and f"FROM ${{{arg}}}" in dockerfile
        # Both services refuse to run on another TensorRT than the pin (build_artifacts.sh / entrypoint).
        assert service_env(services[name])["TENSORRT_VERSION"] == release["tensorrt-version"]
    assert "TENSORRT_VERSION" in (DOCKER_DIR / "build_artifacts.sh").read_text()
    assert "TENSORRT_VERSION" in (DOCKER_DIR / "triton_entrypoint.sh").read_text()


def _mount_for(service: dict, path: str) -> tuple[str, str, bool]:
    """(volume, target, read_only) of the service's volume that contains `path`."""
    for spec in service["volumes"]:
        source, target, *mode = spec.split(":")
        if path.startswith(target.rstrip("/") + "/"):
            return source, target, mode == ["ro"]
    raise AssertionError(f"no volume of the service contains {path}")


def test_ld_preload_is_the_library_the_builder_writes(compose):
    builder, triton = compose["services"]["builder"], compose["services"]["triton"]
    written = service_env(builder)["PLUGIN_LIBRARY"]
    preloaded = service_env(triton)["LD_PRELOAD"]
    assert preloaded == written
    assert Path(written).name == "libtrt_plugin_kit.so"
    # The builder's script installs the compiled library at exactly that path ...
    script = (DOCKER_DIR / "build_artifacts.sh").read_text()
    assert re.search(r'install\s.*libtrt_plugin_kit\.so"?\s+"\$\{PLUGIN_LIBRARY\}"', script)
    assert "command" not in builder  # runs the image's CMD:
    assert 'CMD ["bash", "docker/build_artifacts.sh"]' in (DOCKER_DIR / "builder.Dockerfile").read_text()
    # ... on a named volume that triton mounts at the same place (read-only).
    builder_volume, builder_target, _ = _mount_for(builder, written)
    triton_volume, triton_target, read_only = _mount_for(triton, preloaded)
    assert builder_volume == triton_volume and builder_volume in compose["volumes"]
    assert builder_target == triton_target and read_only


def test_triton_serves_the_repository_the_builder_fills(compose):
    builder, triton = compose["services"]["builder"], compose["services"]["triton"]
    repository = service_env(builder)["MODEL_REPOSITORY"]
    assert flags(triton["command"])["model-repository"] == repository
    assert _mount_for(triton, repository)[0] == _mount_for(builder, repository)[0]


def test_triton_starts_only_after_the_builder_succeeded(compose):
    services = compose["services"]
    assert services["triton"]["depends_on"]["builder"]["condition"] == "service_completed_successfully"
    assert services["loadtest"]["depends_on"]["triton"]["condition"] == "service_healthy"


def test_ports_are_published_on_localhost_and_match_the_server(compose):
    triton = compose["services"]["triton"]
    command = flags(triton["command"])
    published = {}
    for spec in triton["ports"]:
        host_ip, host_port, container_port = interpolate_defaults(spec).split(":")
        assert host_ip == "127.0.0.1", f"{spec} is published beyond localhost"
        published[int(container_port)] = int(host_port)
    assert published == {8000: 8000, 8001: 8001, 8002: 8002}
    assert (command["http-port"], command["grpc-port"], command["metrics-port"]) == ("8000", "8001", "8002")


def test_healthcheck_asks_triton_for_readiness(compose):
    triton = compose["services"]["triton"]
    check = triton["healthcheck"]
    test = " ".join(check["test"])
    assert check["test"][0] == "CMD"
    assert f"http://127.0.0.1:{flags(triton['command'])['http-port']}/v2/health/ready" in test
    assert "-f" in test or "--fail" in test  # curl must fail on a non-2xx answer
    assert check["retries"] >= 1 and check["start_period"]


def test_gpu_is_reserved_for_builder_and_triton(compose):
    for name in ("builder", "triton"):
        devices = compose["services"][name]["deploy"]["resources"]["reservations"]["devices"]
        assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices), name


def test_triton_runs_with_hardened_flags(compose):
    command = flags(compose["services"]["triton"]["command"])
    assert command["model-control-mode"] == "none"
    assert command["strict-readiness"] == "true" and command["exit-on-error"] == "true"
    assert command["allow-sagemaker"] == "false" and command["allow-vertex-ai"] == "false"
    assert int(command["http-max-input-size"]) > 0
    entrypoint = (DOCKER_DIR / "triton_entrypoint.sh").read_text()
    restricted = f"{','.join(RESTRICTED_APIS)}:{ADMIN_HEADER}="
    assert restricted in entrypoint
    assert "--http-restricted-api=" in entrypoint and "--grpc-restricted-protocol=" in entrypoint


def test_dockerfiles_copy_only_what_exists():
    for dockerfile in DOCKER_DIR.glob("*.Dockerfile"):
        for source in re.findall(r"^COPY\s+(.+?)\s+\S+$", dockerfile.read_text(), flags=re.MULTILINE):
            for path in source.split():
                assert (REPO_ROOT / path).exists(), f"{dockerfile.name}: COPY {path} does not exist"


def test_shell_scripts_parse():
    for script in DOCKER_DIR.glob("*.sh"):
        subprocess.run(["bash", "-n", str(script)], check=True)


def _docker_compose_available() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(not _docker_compose_available(), reason="no `docker compose` on this machine")
def test_docker_compose_accepts_the_file():
    result = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE_FILE), "--profile", "loadtest", "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
