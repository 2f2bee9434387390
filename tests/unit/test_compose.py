"""Static checks of docker-compose.yml and docker/ (the compose test, scripts/compose_test.py, runs the cpu
and loadtest profiles for real where a Docker daemon answers; no GPU anywhere in CI).

What is checked is what breaks silently on a GPU host: images of two different TensorRT versions, a plugin
library path where the builder never writes, ports or healthcheck pointing elsewhere than the edge listens,
triton starting before the builder succeeded, a server started otherwise than by serve.py (tritonserver on a
public port, without the edge, with flags that drift from serving.py); and for the CPU profile what a green
run would not show: which profile starts what, the user, the published addresses.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trt_plugin_kit.deploy.compose import ComposeNotFound, compose_binary
from trt_plugin_kit.interface import (
    ADMIN_HEADER,
    DEFAULT_GRPC_PORT,
    DEFAULT_HTTP_PORT,
    DEFAULT_METRICS_PORT,
    REPO_ROOT,
    RESTRICTED_APIS,
)
from trt_plugin_kit.serving import cli as serve
from trt_plugin_kit.serving import shm_budget
from trt_plugin_kit.serving.server import HARDENED_FLAGS, HTTP_MAX_INPUT_BYTES

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
HOST_NETWORK_FILE = REPO_ROOT / "docker" / "compose.host-network.yml"
DOCKER_DIR = REPO_ROOT / "docker"
PYTHON_DOCKERFILE = DOCKER_DIR / "python.Dockerfile"


# Triton of each NGC release, where something here depends on it (server releases "corresponding to NGC
# container YY.MM").
NGC_RELEASE_TRITON = {"25.09": (2, 61, 0), "26.04": (2, 68, 0), "26.05": (2, 69, 0), "26.09": (2, 73, 0)}
# Triton fixes this kit's serving relies on (server PRs) and the first release with each.
TRITON_FIXES = {
    "#8637 out-of-range exception caught": (2, 66, 0),
    "#8676 HTTP JSON shapes checked before sizing buffers": (2, 68, 0),
    "#8925 Inference-Header-Content-Length out of range": (2, 73, 0),
}
IMAGE_PATTERN = re.compile(r"^nvcr\.io/nvidia/(?P<name>tensorrt|tritonserver):(?P<release>\d\d\.\d\d)-py3$")
# "${VAR:-default}" as docker compose interpolates it when VAR is unset.
INTERPOLATION = re.compile(r"\$\{(?P<var>\w+)(?::-(?P<default>[^}]*))?\}")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def interpolate_defaults(text: str) -> str:
    return INTERPOLATION.sub(lambda match: match.group("default") or "", text)


SERVE_COMMAND = ["python3", "-m", "trt_plugin_kit", "serve"]


def serve_args(service: dict) -> argparse.Namespace:
    """The service's command read by serve.py's own parser (a flag it does not know fails here)."""
    command = service["command"]
    assert command[: len(SERVE_COMMAND)] == SERVE_COMMAND, f"not `trt-plugin-kit serve`: {command}"
    return serve.parse_args(command[len(SERVE_COMMAND) :])


def service_env(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict), "use the mapping form for environment"
    return {key: str(value) for key, value in env.items()}


def test_compose_file_parses_and_every_service_has_its_profile(compose):
    profiles = {name: service["profiles"] for name, service in compose["services"].items()}
    assert profiles == {
        "builder": ["gpu"],
        "triton": ["gpu"],
        "triton-cpu": ["cpu"],
        "loadtest": ["loadtest"],
        "perf": ["loadtest"],
    }


def test_plain_docker_compose_up_means_the_gpu_profile():
    """`docker compose up` keeps starting the GPU services; `--profile cpu` replaces the default."""
    settings = dict(
        line.split("=", 1) for line in (REPO_ROOT / ".env").read_text().splitlines() if "=" in line
    )
    assert settings["COMPOSE_PROFILES"] == "gpu"


def test_both_images_are_pinned_to_one_ngc_release_and_no_tensorrt_version_is_declared(compose):
    """The TensorRT version is read from the images at run time (artifact_checks), never pinned beside them:
    a pin is a guess that can disagree with the images."""
    release = compose["x-ngc-release"]
    images = {}
    for key in ("tensorrt-image", "tritonserver-image"):
        match = IMAGE_PATTERN.match(release[key])
        assert match, f"{key} {release[key]!r} is not an nvcr.io/nvidia/<tensorrt|tritonserver>:YY.MM-py3 tag"
        images[match["name"]] = match["release"]
    assert images["tensorrt"] == images["tritonserver"], f"TensorRT of the two images differs: {images}"
    assert set(release) == {"tensorrt-image", "tritonserver-image"}
    assert "TENSORRT_VERSION" not in COMPOSE_FILE.read_text().replace("TENSORRT_VERSION stamp", "")


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
    # The builder stamps the artifacts with its image's TensorRT; triton's entrypoint compares its own.
    script = (DOCKER_DIR / "build_artifacts.sh").read_text()
    assert "artifact_checks)" in script and '"${checks[@]}" version' in script
    stamp = script.index('echo "${trt_version}" > "${stamp}"')  # written last: after every engine
    assert stamp > script.index("python3 build_engines.py") and script.index('rm -f "${stamp}"') < stamp
    entrypoint = (DOCKER_DIR / "triton_entrypoint.sh").read_text()
    assert "python3 -m trt_plugin_kit.engines.artifact_checks serving" in entrypoint
    triton_env = service_env(services["triton"])
    assert triton_env["ARTIFACTS_DIR"] == service_env(services["builder"])["ARTIFACTS_DIR"]
    assert triton_env["PLUGIN_LIBRARY"] == service_env(services["builder"])["PLUGIN_LIBRARY"]


def test_the_builder_builds_the_library_target_alone_bounded_and_removes_its_tree(compose):
    """Not the harness, stress tool or benchmarks; BUILD_JOBS jobs (4 by default) under the service's memory
    limit; a temporary build tree removed however the build ends; links and creators checked before any
    engine is built."""
    builder = compose["services"]["builder"]
    assert service_env(builder)["BUILD_JOBS"] == "${BUILD_JOBS:-4}" and builder["mem_limit"] == "8g"
    script = (DOCKER_DIR / "build_artifacts.sh").read_text()
    assert '--target trt_plugin_kit -j "${jobs}"' in script and 'jobs="${BUILD_JOBS:-4}"' in script
    assert "mktemp -d" in script and "trap 'rm -rf \"${build_dir}\"' EXIT" in script
    checks = script.index('"${checks[@]}" library "${PLUGIN_LIBRARY}" --creators')
    assert checks < script.index("python3 build_engines.py")


@pytest.mark.parametrize("jobs", ["0", "-j", "many", "100", "4; rm -rf /"])
def test_the_builder_refuses_a_bad_build_jobs_value_before_anything_else(tmp_path, jobs):
    env = {"PATH": os.environ["PATH"], "ARTIFACTS_DIR": str(tmp_path), "BUILD_JOBS": jobs,
           "PLUGIN_LIBRARY": str(tmp_path / "l.so"), "MODEL_REPOSITORY": str(tmp_path / "repo")}  # fmt: skip
    result = subprocess.run(
        ["bash", str(DOCKER_DIR / "build_artifacts.sh")], env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2 and "BUILD_JOBS must be a number from 1 to 99" in result.stderr
    assert list(tmp_path.iterdir()) == []


def pinned_release(compose: dict) -> str:
    return IMAGE_PATTERN.match(compose["x-ngc-release"]["tritonserver-image"])["release"]


def test_the_pinned_triton_carries_the_serving_fixes(compose):
    triton = NGC_RELEASE_TRITON[pinned_release(compose)]
    missing = [fix for fix, first in TRITON_FIXES.items() if triton < first]
    assert not missing, f"Triton {triton} of the pinned release lacks {missing}"


def test_release_dependent_flags_are_left_to_serving_py(compose):
    """Triton >= 2.69 (NGC 26.05, server PR #8721) refuses clients' shared memory without
    --allow-client-shm=true and older releases refuse to start with it; --http-max-input-size exists from
    25.05 on. serving.py passes each where `tritonserver --help` lists it: the command names neither."""
    extra = serve_args(compose["services"]["triton"]).tritonserver_args
    assert not [arg for arg in extra if arg.startswith(("--allow-client-shm", "--http-max-input-size"))]
    help_text = "--allow-client-shm --http-max-input-size --http-restricted-api --grpc-restricted-protocol"
    triton_flags = private_tritonserver_flags(compose, help_text)
    assert "--allow-client-shm=true" in triton_flags
    assert f"--http-max-input-size={HTTP_MAX_INPUT_BYTES}" in triton_flags


def test_the_triton_entrypoint_stops_where_it_cannot_read_this_image_s_tensorrt(tmp_path):
    """docker/triton_entrypoint.sh runs the real check (artifact_checks serving): here, with the builder's
    stamp but no libnvinfer, it refuses to start the command and says why (the comparison itself:
    tests/unit/test_artifact_checks.py)."""
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / "TENSORRT_VERSION").write_text("11.3.0.12\n")
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
        "ARTIFACTS_DIR": str(artifacts),
        "PLUGIN_LIBRARY": str(artifacts / "plugins" / "libtrt_plugin_kit.so"),
    }
    result = subprocess.run(
        ["bash", str(DOCKER_DIR / "triton_entrypoint.sh"), "echo", "started"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3, result.stderr
    assert "no TensorRT runtime here (libnvinfer.so.11 / libnvinfer.so.10 not loadable)" in result.stderr
    assert "started" not in result.stdout


@pytest.mark.parametrize("command", ["tritonserver", "/opt/tritonserver/bin/tritonserver"])
def test_the_triton_entrypoint_refuses_tritonserver_without_the_edge(command):
    """An old command line (tritonserver ...) on this image would put tritonserver on the public ports
    without the edge, and with no admin restriction (serving.py adds it): the entrypoint stops it."""
    result = subprocess.run(
        ["bash", str(DOCKER_DIR / "triton_entrypoint.sh"), command, "--model-repository=/x"],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1 and "trt_plugin_kit serve" in result.stderr


def _mount_for(service: dict, path: str) -> tuple[str, str, bool]:
    """(volume, target, read_only) of the service's volume that contains `path`."""
    for spec in service["volumes"]:
        source, target, *mode = spec.split(":")
        if path.startswith(target.rstrip("/") + "/"):
            return source, target, mode == ["ro"]
    raise AssertionError(f"no volume of the service contains {path}")


def test_the_plugin_library_triton_loads_is_the_one_the_builder_writes(compose):
    """serve.py hands --plugin-library to tritonserver's TensorRT backend (--backend-config=tensorrt,
    plugins=); the container's environment has no LD_PRELOAD, so nothing loads it into the edge, serve.py,
    the Python backend's stubs or the healthcheck."""
    builder, triton = compose["services"]["builder"], compose["services"]["triton"]
    written = service_env(builder)["PLUGIN_LIBRARY"]
    preloaded = str(serve_args(triton).plugin_library)
    assert "LD_PRELOAD" not in service_env(triton)
    assert preloaded == written
    assert Path(written).name == "libtrt_plugin_kit.so"
    # The builder's script installs the compiled library at exactly that path ...
    script = (DOCKER_DIR / "build_artifacts.sh").read_text()
    assert re.search(r'install\s.*libtrt_plugin_kit\.so"?\s+"\$\{PLUGIN_LIBRARY\}"', script)
    assert "command" not in builder  # runs the image's CMD:
    assert 'CMD ["bash", "docker/build_artifacts.sh"]' in (DOCKER_DIR / "builder.Dockerfile").read_text()
    # ... and builds every engine model of the repository: mnist and l2norm, then each model.onnx folder.
    assert re.search(r'for onnx in "\$\{MODEL_REPOSITORY\}"/\*/model\.onnx', script) and "--model" in script
    # ... on a named volume that triton mounts at the same place (read-only).
    builder_volume, builder_target, _ = _mount_for(builder, written)
    triton_volume, triton_target, read_only = _mount_for(triton, preloaded)
    assert builder_volume == triton_volume and builder_volume in compose["volumes"]
    assert builder_target == triton_target and read_only


def test_triton_serves_the_repository_the_builder_fills(compose):
    builder, triton = compose["services"]["builder"], compose["services"]["triton"]
    repository = service_env(builder)["MODEL_REPOSITORY"]
    assert str(serve_args(triton).model_repository) == repository
    assert _mount_for(triton, repository)[0] == _mount_for(builder, repository)[0]


def test_triton_starts_only_after_the_builder_succeeded(compose):
    services = compose["services"]
    assert services["triton"]["depends_on"]["builder"]["condition"] == "service_completed_successfully"


def test_loadtest_waits_for_whichever_server_its_profile_starts(compose):
    services = compose["services"]
    for client in ("loadtest", "perf"):
        for server in ("triton", "triton-cpu"):
            dependency = services[client]["depends_on"][server]
            assert dependency == {"condition": "service_healthy", "required": False}
        # Both servers answer as `triton` on the compose network.
        assert service_env(services[client])["TRITON_HOST"] == "triton"
    assert services["triton-cpu"]["networks"]["default"]["aliases"] == ["triton"]


def private_tritonserver_flags(compose: dict, help_text: str = "") -> list[str]:
    """tritonserver's flags as serve.py would start it from the `triton` service's command, behind the edge
    (socket folder stand-in; `help_text` plays `tritonserver --help`)."""
    server = serve.make_server(serve_args(compose["services"]["triton"]), "tensorrt")
    server.socket_dir = Path("/tmp/trt_plugin_kit_triton_x/sockets")
    return server._common_args(help_text)


def test_gpu_server_is_serve_py_with_the_edge_on(compose):
    """The `triton` service runs `make serve`'s launcher, TensorRT variant: the edge on the public ports,
    tritonserver on private Unix sockets only, every tritonserver flag from serving.py (none repeated in
    compose), no admin key anywhere in the files."""
    triton = compose["services"]["triton"]
    command = triton["command"]
    args = serve_args(triton)
    assert (args.variant, args.host, args.restart) == ("tensorrt", "0.0.0.0", "never")
    assert args.edge == "on" and args.http_guard is None
    assert not [arg for arg in command if arg.startswith(("--edge", "--http-guard"))]
    assert "tritonserver" not in command and "entrypoint" not in triton  # the image's entrypoint first
    assert serve.make_server(args, "tensorrt").guarded
    # tritonserver itself: private sockets, no TCP port; serving.py's hardening and restriction flags.
    triton_flags = private_tritonserver_flags(compose, "--http-restricted-api --grpc-restricted-protocol")
    ports = [flag for flag in triton_flags if re.match(r"--(http|grpc|metrics)-port=", flag)]
    addresses = [flag for flag in triton_flags if re.match(r"--(http|grpc|metrics)-address=", flag)]
    assert sorted(ports) == ["--grpc-port=0", "--http-port=0", "--metrics-port=0"]
    assert len(addresses) == 3 and all("=unix:" in flag for flag in addresses)
    assert all(flag in triton_flags for flag in HARDENED_FLAGS)
    assert any(flag.startswith("--http-restricted-api=") for flag in triton_flags)
    # tritonserver's extras after `--` override none of that.
    owned = ("--model-", "--strict-", "--exit-", "--disable-", "--allow-metrics", "--allow-sagemaker")
    owned += ("--allow-vertex-ai", "--http-", "--grpc-", "--metrics-", "--backend-config", "--log-")
    assert args.tritonserver_args == ["--allow-gpu-metrics=true"]
    assert not [arg for arg in args.tritonserver_args if arg.startswith(owned)]


def test_no_admin_key_in_the_compose_files_or_the_entrypoint(compose):
    """The operator's key reaches the container only from the host's environment; tritonserver's is random
    per start (serving.py). Neither the compose files nor the entrypoint carry a key or a restriction flag."""
    for service in ("triton", "triton-cpu"):
        assert service_env(compose["services"][service])["TRITON_ADMIN_KEY"] == "${TRITON_ADMIN_KEY:-}"
    for path in (COMPOSE_FILE, HOST_NETWORK_FILE, DOCKER_DIR / "triton_entrypoint.sh"):
        text = path.read_text()
        for marker in ("restricted-api", "restricted-protocol", f"{ADMIN_HEADER}=", "closed\\n"):
            assert marker not in text, f"{path.name}: {marker}"


# Docker's size units (docker/go-units RAMInBytes, which compose uses for shm_size): 1024-based.
DOCKER_SIZE = re.compile(r"^(?P<number>\d+)(?P<unit>[kmg]?)b?$", re.IGNORECASE)


def docker_size(value: str | int) -> int:
    match = DOCKER_SIZE.match(str(value))
    assert match, f"not a size docker compose reads: {value!r}"
    return int(match["number"]) * 1024 ** " kmg".index(match["unit"].lower() or " ")


def test_docker_sizes_are_read_as_docker_reads_them():
    assert docker_size("141mb") == docker_size("141m") == 141 * 1024 * 1024
    assert docker_size("1gb") == 1024**3 and docker_size(4096) == 4096


@pytest.mark.parametrize(("service", "variant"), [("triton", "tensorrt"), ("triton-cpu", "cpu")])
def test_shm_size_holds_the_python_backends_regions_and_no_more(compose, service, variant):
    """/dev/shm is the sum of the Python backend's regions, each created at its largest size, plus less than
    one growth step: no region can grow into another's (trt_plugin_kit/serving/shm_budget.py)."""
    # CPU: mnist, l2norm, mnist_preprocess x 2, mnist_vit's plugin_onnx stand-in; GPU: mnist_preprocess x 4.
    instances = shm_budget.python_backend_instances(variant)
    assert instances == {"tensorrt": 4, "cpu": 5}[variant]
    size = docker_size(compose["services"][service]["shm_size"])
    assert size == shm_budget.required_shm_bytes(instances) == (instances * 35 + 1) * 1024 * 1024


def test_the_gpu_server_creates_its_regions_at_the_budgeted_size(compose):
    """serving.py gives tritonserver the region flags (shm_size above is their sum); the command does not
    override them."""
    assert all(flag in private_tritonserver_flags(compose) for flag in shm_budget.python_backend_shm_flags())
    extra = serve_args(compose["services"]["triton"]).tritonserver_args
    assert not [arg for arg in extra if arg.startswith("--backend-config")]


def test_ports_are_published_on_localhost_and_match_the_server(compose):
    triton = compose["services"]["triton"]
    args = serve_args(triton)
    published = {}
    for spec in triton["ports"]:
        host_ip, host_port, container_port = interpolate_defaults(spec).split(":")
        assert host_ip == "127.0.0.1", f"{spec} is published beyond localhost"
        published[int(container_port)] = int(host_port)
    assert published == {8000: 8000, 8001: 8001, 8002: 8002}
    # The edge's public ports; tritonserver has none (test_gpu_server_is_serve_py_with_the_edge_on).
    assert (args.http_port, args.grpc_port, args.metrics_port) == (
        DEFAULT_HTTP_PORT,
        DEFAULT_GRPC_PORT,
        DEFAULT_METRICS_PORT,
    )


def test_healthcheck_asks_the_edge_for_readiness(compose):
    triton = compose["services"]["triton"]
    check = triton["healthcheck"]
    test = " ".join(check["test"])
    assert check["test"][0] == "CMD"
    assert f"http://127.0.0.1:{serve_args(triton).http_port}/v2/health/ready" in test
    assert "-f" in test or "--fail" in test  # curl must fail on a non-2xx answer
    assert check["retries"] >= 1 and check["start_period"]


def test_gpu_is_reserved_for_builder_and_triton(compose):
    for name in ("builder", "triton"):
        devices = compose["services"][name]["deploy"]["resources"]["reservations"]["devices"]
        assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices), name


def test_triton_runs_with_hardened_flags(compose):
    triton_flags = private_tritonserver_flags(compose, "--http-restricted-api --grpc-restricted-protocol")
    assert "--model-control-mode=none" in triton_flags
    assert "--strict-readiness=true" in triton_flags and "--exit-on-error=true" in triton_flags
    assert "--allow-sagemaker=false" in triton_flags and "--allow-vertex-ai=false" in triton_flags
    restricted = f"{','.join(RESTRICTED_APIS)}:{ADMIN_HEADER}="
    for flag in ("--http-restricted-api", "--grpc-restricted-protocol"):
        (value,) = [f for f in triton_flags if f.startswith(f"{flag}=")]
        assert value.startswith(f"{flag}={restricted}") and len(value) > len(f"{flag}={restricted}") + 30


def test_the_images_install_pinned_versions_of_what_they_import():
    """The system python3 of NVIDIA's image runs serve.py, the edge and the readiness wait; the build
    imports them (a missing package fails the build, not the start on a GPU node). Every package of both
    images' requirement files is pinned to one version (issue 45: a rebuild installs what was tested)."""
    dockerfile = (DOCKER_DIR / "triton.Dockerfile").read_text()
    assert "pip install -r /tmp/triton-requirements.txt" in dockerfile
    for requirements, packages in {
        "triton-requirements.txt": ("pillow", "aiohttp", "grpcio", "numpy", "tritonclient[grpc,http]"),
        "builder-requirements.txt": ("cmake", "numpy", "onnx", "pillow", "pyyaml", "tqdm", "triton"),
    }.items():
        lines = [
            line.split("#")[0].strip()
            for line in (DOCKER_DIR / requirements).read_text().splitlines()
            if line.split("#")[0].strip()
        ]
        assert all(re.fullmatch(r"[\w\-]+(\[[\w,]+\])?==\d+(\.\d+)+", line) for line in lines), lines
        names = {line.split("==")[0] for line in lines}
        assert set(packages) <= names, (requirements, names)
    assert (
        "import trt_plugin_kit.serving.edge.app, trt_plugin_kit.serving.cli, "
        "trt_plugin_kit.tritonserver.protocol" in dockerfile
    )


def test_dockerfiles_copy_only_what_exists():
    for dockerfile in DOCKER_DIR.glob("*.Dockerfile"):
        # COPY --from=STAGE copies from another stage, not the context.
        for source in re.findall(
            r"^COPY\s+(?!--from=)(.+?)\s+\S+$", dockerfile.read_text(), flags=re.MULTILINE
        ):
            for path in source.split():
                assert (REPO_ROOT / path).exists(), f"{dockerfile.name}: COPY {path} does not exist"


def test_dockerfiles_copy_only_what_their_dockerignore_admits():
    """Each image's context is an allowlist (`*`, then `!PATH` lines): a COPY of a path it does not admit
    fails only when the image is built, which for the GPU image is never here."""
    for dockerfile in DOCKER_DIR.glob("*.Dockerfile"):
        ignore = dockerfile.with_name(dockerfile.name + ".dockerignore")
        lines = ignore.read_text().split() if ignore.is_file() else []
        if "*" not in lines:
            continue
        admitted = [line[1:].rstrip("/") for line in lines if line.startswith("!")]
        for source in re.findall(
            r"^COPY\s+(?!--from=)(.+?)\s+\S+$", dockerfile.read_text(), flags=re.MULTILINE
        ):
            for path in source.split():
                path = path.rstrip("/")
                # the path itself, a folder above it, or (a folder copied whole) entries below it
                inside = (path == a or path.startswith(a + "/") or a.startswith(path + "/") for a in admitted)
                assert any(inside), f"{dockerfile.name}: COPY {path} is not admitted by {ignore.name}"


def test_every_image_serves_grpc_through_the_compiled_front():
    """Issue 39: the GPU image (NVIDIA's, not buildable here) builds the edge's compiled gRPC front as the
    CPU image stages it, puts it where $TRT_PLUGIN_KIT_EDGE_GRPC says, and fails its build if it cannot
    start."""
    from trt_plugin_kit.serving.edge.contract import NATIVE_GRPC_ENV
    from trt_plugin_kit.serving.edge.native_front import BINARY_NAME

    gpu = (DOCKER_DIR / "triton.Dockerfile").read_text()
    assert "AS edge-native" in gpu and "cmake -S trt_plugin_kit/serving/edge/native" in gpu
    (copied,) = re.findall(rf"^COPY --from=edge-native /out/{BINARY_NAME} (\S+)$", gpu, flags=re.MULTILINE)
    assert f"ENV {NATIVE_GRPC_ENV}={copied}" in gpu
    assert f'RUN "${{{NATIVE_GRPC_ENV}}}" </dev/null | grep -q "configuration ended early"' in gpu
    cpu = (DOCKER_DIR / "python.Dockerfile").read_text()
    assert f"COPY --from=edge-native /out/{BINARY_NAME}" in cpu


def test_shell_scripts_parse():
    for script in DOCKER_DIR.glob("*.sh"):
        subprocess.run(["bash", "-n", str(script)], check=True)


# --------------------------------------------------------------------------------------------------
# The CPU profile (run for real by scripts/compose_test.py; these say why a green run is also a safe one)


def dockerfile_stage(name: str) -> str:
    text = PYTHON_DOCKERFILE.read_text()
    start = re.search(rf"^FROM \S+ AS {re.escape(name)}$", text, flags=re.MULTILINE)
    assert start, f"no stage {name} in {PYTHON_DOCKERFILE.name}"
    following = re.search(r"^FROM ", text[start.end() :], flags=re.MULTILINE)
    return text[start.start() : start.end() + following.start()] if following else text[start.start() :]


def test_cpu_service_builds_from_a_public_python_image_by_default(compose):
    for name, target in (("triton-cpu", "triton-cpu"), ("loadtest", "loadtest")):
        build = compose["services"][name]["build"]
        assert build["dockerfile"] == "docker/python.Dockerfile" and build["target"] == target
        args = {key: interpolate_defaults(value) for key, value in build["args"].items()}
        assert args == {"PYTHON_IMAGE": "python:3.11-slim", "PIP_INSTALL_OPTIONS": ""}
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in PYTHON_DOCKERFILE.read_text()


def test_cpu_server_is_serve_py_so_its_flags_come_from_serving_py(compose):
    assert (
        "command" not in compose["services"]["triton-cpu"]
        and "entrypoint" not in compose["services"]["triton-cpu"]
    )
    stage = dockerfile_stage("triton-cpu")
    assert 'CMD ["trt-plugin-kit", "serve"]' in stage
    assert "TRITON_VARIANT=cpu" in stage


def test_cpu_server_runs_unprivileged_on_a_read_only_filesystem(compose):
    service = compose["services"]["triton-cpu"]
    assert "user" not in service  # the image's
    user = re.findall(r"^USER (\S+)$", dockerfile_stage("triton-cpu"), flags=re.MULTILINE)
    assert user == ["kit"]
    assert re.search(r"useradd .*--uid 10001 .* kit", dockerfile_stage("base"))
    assert service["read_only"] is True and service["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in service["security_opt"]
    assert service["restart"] in ("unless-stopped", "on-failure")


def test_cpu_ports_are_published_on_localhost_and_health_asks_for_readiness(compose):
    service = compose["services"]["triton-cpu"]
    published = {}
    for spec in service["ports"]:
        host_ip, host_port, container_port = interpolate_defaults(spec).split(":")
        assert host_ip == "127.0.0.1", f"{spec} is published beyond localhost"
        published[int(container_port)] = int(host_port)
    assert published == {8000: 8000, 8001: 8001, 8002: 8002}  # serve.py's defaults in the container
    test = " ".join(service["healthcheck"]["test"])
    assert "/v2/health/ready" in test and "TRITON_HTTP_PORT" in test


def test_python_dockerfile_context_holds_what_it_copies_and_mounts():
    """Per-Dockerfile .dockerignore: everything else stays out of the context (.venv, build/, data)."""
    allowed = [
        line[1:].rstrip("/")
        for line in (DOCKER_DIR / "python.Dockerfile.dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    text = PYTHON_DOCKERFILE.read_text()
    sources = [
        p
        for src in re.findall(r"^COPY\s+(?!--from=)(.+?)\s+\S+$", text, flags=re.MULTILINE)
        for p in src.split()
    ]
    sources += re.findall(r"--mount=type=bind,source=([^,\s]+)", text)
    assert sources
    for source in sources:
        # The source itself, a folder above it, or some files of it (plugins/*/spec.yaml for `COPY plugins`).
        admitted = [
            a for a in allowed if source == a or source.startswith(a + "/") or a.startswith(source + "/")
        ]
        assert admitted, f"{source} not in the context"


class ComposeLoader(yaml.SafeLoader):
    """YAML with compose's merge tags (!reset, !override), read as plain values."""


def _untagged(loader: yaml.SafeLoader, node: yaml.Node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


for _tag in ("!reset", "!override"):
    ComposeLoader.add_constructor(_tag, _untagged)


def test_host_network_override_keeps_traffic_on_loopback_and_builds_offline():
    override = yaml.load(HOST_NETWORK_FILE.read_text(), Loader=ComposeLoader)
    triton_cpu = override["services"]["triton-cpu"]
    assert triton_cpu["ports"] == [] and triton_cpu["networks"] == {}  # reset: nothing published
    for name in ("triton-cpu", "loadtest"):
        service = override["services"][name]
        assert service["network_mode"] == "host"
        assert service["build"]["network"] == "none"
        assert service_env(service)["TRITON_HOST"] == "127.0.0.1"


def _compose_command() -> list[str] | None:
    try:
        return compose_binary()
    except ComposeNotFound:  # no compose v2 here: the static checks above still ran
        return None


@pytest.mark.skipif(_compose_command() is None, reason="no Docker Compose v2 on this machine")
def test_docker_compose_accepts_the_files_and_profiles_select_the_services():
    base = [*_compose_command(), "--project-directory", str(REPO_ROOT), "-f", str(COMPOSE_FILE)]

    def services(*arguments: str) -> set[str]:
        result = subprocess.run(
            [*base, *arguments, "config", "--services"], capture_output=True, text=True, timeout=60, env=ENV
        )
        assert result.returncode == 0, result.stderr
        return set(result.stdout.split())

    assert services() == {"builder", "triton"}  # .env: COMPOSE_PROFILES=gpu
    assert services("--profile", "cpu") == {"triton-cpu"}
    assert services("--profile", "cpu", "--profile", "loadtest") == {"triton-cpu", "loadtest", "perf"}
    assert services("--profile", "gpu", "--profile", "loadtest") == {"builder", "triton", "loadtest", "perf"}

    merged = subprocess.run(
        [*base, "-f", str(HOST_NETWORK_FILE), "--profile", "cpu", "config", "--format", "json"],
        capture_output=True, text=True, timeout=60, env=ENV,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr
    service = json.loads(merged.stdout)["services"]["triton-cpu"]
    assert service["network_mode"] == "host" and not service.get("ports") and not service.get("networks")


ENV = {key: value for key, value in os.environ.items() if not key.startswith("COMPOSE_")}
