"""deploy/kubernetes/ without a cluster: both overlays rendered by the real kustomize (`kubectl kustomize`),
every object validated against the JSON schemas of a current Kubernetes release (kubernetes-validate,
strict), scanned by checkov, and held to the kit's invariants: every server container runs `make serve`'s
launcher (trt_plugin_kit.serving.cli: the edge on the public ports, tritonserver on private sockets with
serving.py's flags), the same model repository, plugin library and ports as docker-compose.yml, no admin key
in any file.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from trt_plugin_kit.deploy import kubernetes as k8s
from trt_plugin_kit.interface import (
    DEFAULT_GRPC_PORT,
    DEFAULT_HTTP_PORT,
    DEFAULT_METRICS_PORT,
    MODEL_REPOSITORY,
    REPO_ROOT,
)
from trt_plugin_kit.serving import shm_budget
from trt_plugin_kit.serving.cli import parse_args
from trt_plugin_kit.serving.server import HARDENED_FLAGS
from trt_plugin_kit.serving.shm_budget import MIB

KUBERNETES_DIR = REPO_ROOT / "deploy" / "kubernetes"
OVERLAYS = ("gpu", "cpu")
# kustomize v5 (kubectl >= 1.27) renders `patches:`/`labels:`; Debian 12's kubectl 1.20 embeds v2.0.3.
MIN_KUSTOMIZE = (5, 0)
KINDS = {
    "Namespace",
    "ServiceAccount",
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "NetworkPolicy",
    "ServiceMonitor",
    "ConfigMap",
    "PrometheusRule",
}
# Not in Kubernetes' schemas: checked below by hand.
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule", "ServingRuntime"}
PUBLIC_PORTS = {"http": DEFAULT_HTTP_PORT, "grpc": DEFAULT_GRPC_PORT, "metrics": DEFAULT_METRICS_PORT}


def kustomize_version() -> tuple[int, ...]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail(
            "kubectl not found: the Kubernetes checks render the overlays with `kubectl kustomize` "
            "(kubectl >= 1.27, kustomize v5; this project's machines carry kubectl 1.32). Debian 12's "
            "kubernetes-client (1.20) is too old to render them."
        )
    result = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True)
    version = json.loads(result.stdout).get("kustomizeVersion", "v0")
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    version = kustomize_version()
    assert version >= MIN_KUSTOMIZE, f"kubectl's kustomize {version} is older than v5: use kubectl >= 1.27"
    documents = {}
    for overlay in OVERLAYS:
        result = subprocess.run(
            ["kubectl", "kustomize", str(KUBERNETES_DIR / "overlays" / overlay)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr == "", f"kustomize warns about overlays/{overlay}: {result.stderr}"
        documents[overlay] = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return documents


@pytest.fixture(scope="module")
def serving_runtime() -> dict:
    return yaml.safe_load(k8s.SERVING_RUNTIME.read_text())


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(k8s.COMPOSE_FILE.read_text())


def find(documents: list[dict], kind: str) -> dict:
    (match,) = [doc for doc in documents if doc["kind"] == kind]
    return match


def pod_spec(documents: list[dict]) -> dict:
    return find(documents, "Deployment")["spec"]["template"]["spec"]


def container(documents: list[dict], name: str) -> dict:
    (match,) = [c for c in pod_spec(documents)["containers"] if c["name"] == name]
    return match


def all_containers(spec: dict) -> list[dict]:
    return spec.get("initContainers", []) + spec["containers"]


def env_of(container_spec: dict) -> dict[str, str]:
    return {item["name"]: item.get("value") for item in container_spec.get("env", [])}


def serve_args(container_spec: dict) -> argparse.Namespace:
    """A GPU server container's args (the image's entrypoint runs them) read by serve.py's own parser."""
    args = container_spec["args"]
    serving = args[: len(k8s.SERVE_COMMAND)] == list(k8s.SERVE_COMMAND)
    assert serving, f"{container_spec['name']} does not run `trt-plugin-kit serve`: {args}"
    return parse_args(args[len(k8s.SERVE_COMMAND) :])


def compose_serve_args(compose: dict) -> argparse.Namespace:
    command = compose["services"]["triton"]["command"]
    assert command[: len(k8s.SERVE_COMMAND)] == list(k8s.SERVE_COMMAND)
    return parse_args(command[len(k8s.SERVE_COMMAND) :])


# ---------------------------------------------------------------------------------------------------------
# Generated files, rendering, schemas, security scan


def test_generated_files_are_current():
    stale = k8s.stale_files()
    assert not stale, (
        f"regenerate with `python -m trt_plugin_kit.deploy.kubernetes` (make k8s-generate): {stale}"
    )


def _server_args(document: dict) -> list[str]:
    """The server container's args of a generated Deployment patch or ServingRuntime."""
    spec = document["spec"]
    return (spec["template"]["spec"] if "template" in spec else spec)["containers"][0]["args"]


def test_generated_files_follow_their_sources():
    """Another pin moves the images and nothing else (the TensorRT version is read from them at run time):
    the edge stands in front of every Triton release, and serving.py picks the release-dependent
    tritonserver flags from `tritonserver --help`."""
    pin = k8s.read_ngc_pin()
    extra = k8s.compose_tritonserver_args()
    current = {"gpu": k8s.gpu_deployment_patch(pin, extra), "kserve": k8s.serving_runtime(pin, extra)}
    for release in ("25.09", "26.04", "26.05", "26.09"):
        moved = k8s.NgcPin(release, pin.artifacts_dir, pin.plugin_library, pin.model_repository)
        patch, runtime = k8s.gpu_deployment_patch(moved, extra), k8s.serving_runtime(moved, extra)
        (triton,) = patch["spec"]["template"]["spec"]["containers"]
        assert triton["name"] == "triton" and triton["image"] == f"{k8s.TRITON_GPU_IMAGE}:{release}"
        assert "TENSORRT_VERSION" not in env_of(triton)
        assert _server_args(patch) == _server_args(current["gpu"])
        assert _server_args(runtime) == _server_args(current["kserve"])
        assert runtime["spec"]["protocolVersions"] == ["v2", "grpc-v2"]
    # tritonserver's extras follow compose's `triton` command.
    other = k8s.gpu_deployment_patch(pin, ["--log-info=false"])
    assert parse_args(_server_args(other)[len(k8s.SERVE_COMMAND) :]).tritonserver_args == ["--log-info=false"]
    # resources.yaml (by hand) and the generated patch name the same containers.
    by_hand = yaml.safe_load((KUBERNETES_DIR / "overlays" / "gpu" / "resources.yaml").read_text())
    assert [c["name"] for c in by_hand["spec"]["template"]["spec"]["containers"]] == ["triton"]


def test_both_overlays_render_every_object(rendered):
    for overlay, documents in rendered.items():
        assert {doc["kind"] for doc in documents} == KINDS, overlay
        for doc in documents:
            if doc["kind"] != "Namespace":
                assert doc["metadata"]["namespace"] == "trt-plugin-kit", (overlay, doc["kind"])


def test_every_object_is_valid_for_a_current_kubernetes_strictly(rendered, serving_runtime):
    version = kubernetes_validate.latest_version()
    assert tuple(int(p) for p in version.split(".")[:2]) >= (1, 33), f"schemas of {version} are not current"
    checked = 0
    for overlay, documents in rendered.items():
        for doc in documents:
            if doc["kind"] in CUSTOM_KINDS:
                continue
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                pytest.fail(f"overlays/{overlay} {doc['kind']}: {error.message}")
            checked += 1
    assert checked == 2 * len(KINDS - CUSTOM_KINDS)
    # The custom resources' pod parts are Kubernetes types: validate them as a Pod would be.
    runtime_spec = serving_runtime["spec"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "servingruntime"},
        "spec": {"containers": runtime_spec["containers"], "volumes": runtime_spec["volumes"]},
    }
    kubernetes_validate.validate(pod, version, strict=True)


def test_the_validator_rejects_what_it_should(rendered):
    deployment = copy.deepcopy(find(rendered["gpu"], "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, kubernetes_validate.latest_version(), strict=True)


def test_custom_resources_use_their_apis_fields(rendered, serving_runtime):
    # ServiceMonitor (monitoring.coreos.com/v1) and ServingRuntime (serving.kserve.io/v1alpha1): the fields
    # used exist in those CRDs (prometheus-operator, KServe); no schema of theirs ships with Kubernetes.
    monitor = find(rendered["gpu"], "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor["spec"]) == {"selector", "endpoints"}
    for endpoint in monitor["spec"]["endpoints"]:
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout"}
    assert serving_runtime["apiVersion"] == "serving.kserve.io/v1alpha1"
    assert set(serving_runtime["spec"]) <= {
        "supportedModelFormats",
        "protocolVersions",
        "containers",
        "volumes",
        "nodeSelector",
        "tolerations",
        "annotations",
        "labels",
    }
    assert serving_runtime["spec"]["containers"][0]["name"] == "kserve-container"  # KServe merges into it


def test_monitoring_parts_are_deploy_monitoring_s_files(rendered):
    # The dashboard for Grafana's sidecar and the rules for the Prometheus Operator, as deploy/monitoring/
    # holds them; PrometheusRule (monitoring.coreos.com/v1) fields as its CRD has them.
    for documents in rendered.values():
        dashboard = find(documents, "ConfigMap")
        assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert dashboard["data"] == {k8s.DASHBOARD_FILE.name: k8s.DASHBOARD_FILE.read_text()}
        rule = find(documents, "PrometheusRule")
        assert rule["apiVersion"] == "monitoring.coreos.com/v1" and set(rule["spec"]) == {"groups"}
        assert rule["spec"] == yaml.safe_load(k8s.RULES_FILE.read_text())
        for group in rule["spec"]["groups"]:
            assert set(group) == {"name", "rules"}
            for item in group["rules"]:
                assert set(item) <= {"record", "alert", "expr", "for", "labels", "annotations"}


def accepted_checkov_findings(deployment: dict) -> dict[str, str]:
    annotations = deployment["metadata"].get("annotations", {})
    return dict(v.split("=", 1) for k, v in annotations.items() if k.startswith("checkov.io/skip"))


def test_checkov_finds_nothing_but_the_documented_exceptions(rendered, tmp_path):
    checkov = os.environ.get("CHECKOV") or str(REPO_ROOT / ".venv-checkov" / "bin" / "checkov")
    if not Path(checkov).is_file():
        pytest.fail("checkov not found: `make test` installs it into .venv-checkov (or set CHECKOV=path)")
    for overlay, documents in rendered.items():
        (tmp_path / f"{overlay}.yaml").write_text(yaml.safe_dump_all(documents))
    result = subprocess.run(
        [checkov, "-d", str(tmp_path), "--framework", "kubernetes", "--skip-download", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    reports = json.loads(result.stdout)
    (report,) = reports if isinstance(reports, list) else [reports]
    failed = [(c["check_id"], c["check_name"], c["file_path"]) for c in report["results"]["failed_checks"]]
    assert not failed, f"checkov findings: {failed}"
    assert report["summary"]["passed"] > 100 and report["summary"]["resource_count"] >= 2 * len(KINDS)
    accepted = accepted_checkov_findings(find(rendered["gpu"], "Deployment"))
    skipped = {c["check_id"] for c in report["results"]["skipped_checks"]}
    assert skipped == set(accepted), "an accepted exception no longer applies: remove its annotation"
    readme = (KUBERNETES_DIR / "README.md").read_text()
    for check_id, reason in accepted.items():
        assert len(reason) > 30 and check_id in readme, f"{check_id}: document the reason in the README"


# ---------------------------------------------------------------------------------------------------------
# Invariants shared with compose and `make serve`


def test_gpu_server_runs_compose_s_serve_py_command(rendered, compose):
    """The gpu overlay's server starts exactly as compose's `triton` service: serve.py, TensorRT variant, the
    edge on, the kubelet restarting the container (--restart=never), tritonserver's flags from serving.py."""
    triton = container(rendered["gpu"], "triton")
    assert "command" not in triton  # the image's entrypoint (TensorRT stamp check) runs the args
    assert serve_args(triton) == compose_serve_args(compose)
    args = serve_args(triton)
    assert (args.variant, args.host, args.restart, args.edge) == ("tensorrt", "0.0.0.0", "never", "on")
    assert not [arg for arg in triton["args"] if arg.startswith(("--edge", "--http-guard"))]
    # No tritonserver flag is repeated in the manifests: serving.py owns them (TritonServer._common_args).
    assert "tritonserver" not in triton["args"]
    assert not [flag for flag in HARDENED_FLAGS if flag in triton["args"]]
    assert args.tritonserver_args == k8s.compose_tritonserver_args() == ["--allow-gpu-metrics=true"]


def test_public_ports_are_the_edge_s(rendered):
    """One container; serve.py's edge listens on the public ports, tritonserver on private sockets only."""
    names = [c["name"] for c in pod_spec(rendered["gpu"])["containers"]]
    assert names == ["triton"]
    args = serve_args(container(rendered["gpu"], "triton"))
    assert (args.http_port, args.grpc_port, args.metrics_port) == tuple(PUBLIC_PORTS.values())
    endpoint_flags = ("--http-", "--grpc-", "--metrics-")
    assert not [arg for arg in args.tritonserver_args if arg.startswith(endpoint_flags)]


def test_gpu_artifacts_are_the_builders_and_compose_paths(rendered, compose):
    spec = pod_spec(rendered["gpu"])
    (builder,) = spec["initContainers"]
    triton = container(rendered["gpu"], "triton")
    builder_env, args = env_of(builder), serve_args(triton)
    compose_builder = compose["services"]["builder"]["environment"]
    # Same paths as compose, the same bounded compile; Triton loads the library the builder writes.
    for key in ("ARTIFACTS_DIR", "PLUGIN_LIBRARY", "MODEL_REPOSITORY"):
        assert builder_env[key] == compose_builder[key], key
    assert compose_builder["BUILD_JOBS"] == f"${{BUILD_JOBS:-{builder_env['BUILD_JOBS']}}}"
    assert str(args.plugin_library) == builder_env["PLUGIN_LIBRARY"]
    assert str(args.model_repository) == builder_env["MODEL_REPOSITORY"]
    # The entrypoint compares the builder's stamp with the image's TensorRT and checks this library's links.
    assert {key: env_of(triton)[key] for key in ("ARTIFACTS_DIR", "PLUGIN_LIBRARY")} == {
        key: builder_env[key] for key in ("ARTIFACTS_DIR", "PLUGIN_LIBRARY")
    }
    # The builder writes into the volume that the server mounts read-only at the same place.
    builder_mount = {m["mountPath"]: m for m in builder["volumeMounts"]}[builder_env["ARTIFACTS_DIR"]]
    triton_mount = {m["mountPath"]: m for m in triton["volumeMounts"]}[builder_env["ARTIFACTS_DIR"]]
    assert builder_mount["name"] == triton_mount["name"] and triton_mount["readOnly"]
    assert not builder_mount.get("readOnly")
    # Runs the image's command (docker/build_artifacts.sh) from the Dockerfile's WORKDIR.
    assert "command" not in builder and "args" not in builder
    dockerfile = (REPO_ROOT / "docker" / "builder.Dockerfile").read_text()
    assert f"WORKDIR {k8s.BUILDER_WORKDIR}\n" in dockerfile
    # Images: of the release compose pins, built from the compose Dockerfiles.
    release = k8s.read_ngc_pin().release
    assert builder["image"] == f"{k8s.BUILDER_IMAGE}:{release}"
    assert triton["image"] == f"{k8s.TRITON_GPU_IMAGE}:{release}"
    # The image carries the edge's dependencies (tests/unit/test_compose.py checks the list).
    assert "aiohttp==" in (REPO_ROOT / "docker" / "triton-requirements.txt").read_text()


def test_gpus_are_requested_by_the_builder_and_the_server(rendered):
    spec = pod_spec(rendered["gpu"])
    for item in [spec["initContainers"][0], container(rendered["gpu"], "triton")]:
        assert item["resources"]["limits"]["nvidia.com/gpu"] == "1", item["name"]
    for item in all_containers(pod_spec(rendered["cpu"])):
        assert "nvidia.com/gpu" not in json.dumps(item.get("resources", {}))


def test_the_plugin_library_is_preloaded_by_serve_py_alone(rendered, serving_runtime):
    """No LD_PRELOAD in any manifest: serve.py puts --plugin-library into tritonserver's environment only
    (not into its own, the edge's or a probe's, and never twice)."""
    for overlay, documents in rendered.items():
        assert "LD_PRELOAD" not in yaml.safe_dump_all(documents), overlay
    assert "LD_PRELOAD" not in yaml.safe_dump(serving_runtime)
    assert serve_args(container(rendered["gpu"], "triton")).plugin_library is not None
    assert parse_args(container(rendered["cpu"], "triton")["args"]).plugin_library is None


def test_cpu_server_starts_like_make_serve(rendered, compose):
    triton = container(rendered["cpu"], "triton")
    assert triton["command"] == ["trt-plugin-kit", "serve"]
    args = parse_args(triton["args"])  # serve.py's own parser: flags it does not know fail here
    assert (args.variant, args.host, args.restart) == ("cpu", "0.0.0.0", "never")
    assert (args.http_port, args.grpc_port, args.metrics_port) == tuple(PUBLIC_PORTS.values())
    assert args.model_repository == MODEL_REPOSITORY and args.tritonserver_args == []
    version = re.search(r'^version = "(.+)"$', (REPO_ROOT / "pyproject.toml").read_text(), re.MULTILINE)[1]
    assert triton["image"] == f"trt-plugin-kit/triton-cpu:{version}"


def test_dev_shm_holds_the_python_backends_regions_and_no_more(rendered, serving_runtime):
    """Each pod's /dev/shm: the Python backend's regions of its overlay's configurations, each created at its
    largest size, plus less than one growth step (trt_plugin_kit/serving/shm_budget.py)."""
    budget = {
        "cpu": shm_budget.required_shm_bytes(shm_budget.python_backend_instances("cpu")),
        "gpu": shm_budget.required_shm_bytes(shm_budget.python_backend_instances("tensorrt")),
    }
    assert budget == {"cpu": 176 * MIB, "gpu": 141 * MIB}  # the CPU variant serves mnist_vit by plugin_onnx
    runtime_spec = serving_runtime["spec"]
    for overlay, spec in [*((o, pod_spec(d)) for o, d in rendered.items()), ("kserve", runtime_spec)]:
        volumes = {v["name"]: v for v in spec["volumes"]}
        dshm = volumes["dshm"]["emptyDir"]
        assert dshm["medium"] == "Memory", overlay
        assert quantity_bytes(dshm["sizeLimit"]) == budget["cpu" if overlay == "cpu" else "gpu"], overlay
        mounts = {m["mountPath"]: m["name"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
        assert mounts["/dev/shm"] == "dshm", overlay
    # Every server starts trt_plugin_kit.serving.cli, whose tritonserver gets the region flags from
    # serving.py;
    # no manifest overrides them.
    for server in (container(rendered["gpu"], "triton"), runtime_spec["containers"][0]):
        assert not [arg for arg in serve_args(server).tritonserver_args if arg.startswith("--backend-config")]


def quantity_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity in binary units ("141Mi") as bytes."""
    number, unit = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", quantity).groups()
    return int(number) * {None: 1, "Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB}[unit]


def test_ports_service_and_probes_agree(rendered):
    for overlay, documents in rendered.items():
        service = find(documents, "Service")
        assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == PUBLIC_PORTS, overlay
        assert all(p["targetPort"] == p["port"] for p in service["spec"]["ports"])
        spec = pod_spec(documents)
        declared = {p["containerPort"]: p.get("name") for c in spec["containers"] for p in c.get("ports", [])}
        assert declared == {port: name for name, port in PUBLIC_PORTS.items()}, overlay
        triton = container(documents, "triton")
        # Probes on the public HTTP port: the edge's, which forwards them to tritonserver's socket.
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            handler = triton[probe]
            assert set(handler) - {"periodSeconds", "timeoutSeconds", "failureThreshold"} == {"httpGet"}
            assert handler["httpGet"]["port"] == DEFAULT_HTTP_PORT, (overlay, probe)
            path = "/v2/health/ready" if probe == "readinessProbe" else "/v2/health/live"
            assert handler["httpGet"]["path"] == path, (overlay, probe)


def test_selectors_match_the_pods(rendered):
    for overlay, documents in rendered.items():
        deployment = find(documents, "Deployment")
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        selectors = {
            "Deployment": deployment["spec"]["selector"]["matchLabels"],
            "Service": find(documents, "Service")["spec"]["selector"],
            "PodDisruptionBudget": find(documents, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
            "NetworkPolicy": find(documents, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"],
        }
        for kind, selector in selectors.items():
            assert selector.items() <= labels.items(), (overlay, kind)
        monitor = find(documents, "ServiceMonitor")["spec"]
        service = find(documents, "Service")
        assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        assert monitor["endpoints"][0]["port"] == "metrics"
        hpa = find(documents, "HorizontalPodAutoscaler")["spec"]
        assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"}


def test_network_policy_admits_inference_and_metrics_only(rendered):
    policy = find(rendered["gpu"], "NetworkPolicy")["spec"]
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"} and policy["egress"] == []
    open_ports = {p["port"] for rule in policy["ingress"] if "from" not in rule for p in rule["ports"]}
    assert open_ports == {DEFAULT_HTTP_PORT, DEFAULT_GRPC_PORT}
    (restricted,) = [rule for rule in policy["ingress"] if "from" in rule]
    assert [p["port"] for p in restricted["ports"]] == [DEFAULT_METRICS_PORT]


def test_every_container_is_locked_down(rendered, serving_runtime):
    for overlay, documents in rendered.items():
        spec = pod_spec(documents)
        assert spec["securityContext"]["runAsNonRoot"] and spec["automountServiceAccountToken"] is False
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for item in all_containers(spec) + serving_runtime["spec"]["containers"]:
            context = item["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"]
            assert context["capabilities"]["drop"] == ["ALL"], (overlay, item["name"])
        namespace = find(documents, "Namespace")["metadata"]["labels"]
        assert namespace["pod-security.kubernetes.io/enforce"] == "restricted"


def test_autoscaler_scales_on_the_adapters_queue_metric(rendered):
    values = yaml.safe_load((KUBERNETES_DIR / "prometheus-adapter" / "values.yaml").read_text())
    (rule,) = values["rules"]["custom"]
    assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}  # per pod, as a Pods metric needs
    for overlay, documents in rendered.items():
        hpa = find(documents, "HorizontalPodAutoscaler")
        assert hpa["apiVersion"] == "autoscaling/v2"
        metrics = {m["type"]: m for m in hpa["spec"]["metrics"]}
        queue = metrics["Pods"]["pods"]
        assert queue["metric"]["name"] == rule["name"]["as"] and int(queue["target"]["averageValue"]) > 0
        # The CPU variant adds CPU use (its queues stay short when saturated: overlays/cpu/autoscaler.yaml).
        assert set(metrics) == ({"Pods", "Resource"} if overlay == "cpu" else {"Pods"}), overlay
        assert hpa["spec"]["minReplicas"] >= 2  # the PodDisruptionBudget leaves one serving during a drain


def test_serving_runtime_serves_the_model_storage_through_serve_py(serving_runtime):
    pin = k8s.read_ngc_pin()
    (server,) = serving_runtime["spec"]["containers"]
    env = env_of(server)
    assert env["ARTIFACTS_DIR"] == k8s.KSERVE_MODEL_DIR and "TENSORRT_VERSION" not in env
    # The storage holds what the builder writes into its artifacts folder, at the same relative paths.
    args = serve_args(server)
    assert str(args.model_repository) == f"{k8s.KSERVE_MODEL_DIR}/{pin.relative(pin.model_repository)}"
    assert str(args.plugin_library) == f"{k8s.KSERVE_MODEL_DIR}/{pin.relative(pin.plugin_library)}"
    assert (args.variant, args.host, args.restart, args.edge) == ("tensorrt", "0.0.0.0", "never", "on")
    assert not [flag for flag in HARDENED_FLAGS if flag in server["args"]]  # serving.py's
    # The edge on KServe's ports; the metrics port is the one the annotations name.
    assert (args.http_port, args.grpc_port) == (k8s.KSERVE_HTTP_PORT, k8s.KSERVE_GRPC_PORT)
    annotations = serving_runtime["metadata"]["annotations"]
    assert int(annotations["prometheus.kserve.io/port"]) == args.metrics_port == DEFAULT_METRICS_PORT
    assert serving_runtime["spec"]["protocolVersions"] == ["v2", "grpc-v2"]
    assert env["PLUGIN_LIBRARY"] == str(args.plugin_library)  # the entrypoint checks its links
    # Both protocols the edge serves are declared (issue 45: gRPC was started but not declared).
    assert server["ports"] == [
        {"name": "http1", "containerPort": k8s.KSERVE_HTTP_PORT, "protocol": "TCP"},
        {"name": "grpc-port", "containerPort": k8s.KSERVE_GRPC_PORT, "protocol": "TCP"},
    ]


def test_servers_have_a_writable_tmp(rendered, serving_runtime):
    """Under a read-only root filesystem, TritonServer's work folder and tritonserver's private sockets live
    in /tmp (tempfile): an emptyDir in every server container."""
    specs = [(o, pod_spec(d), container(d, "triton")) for o, d in rendered.items()]
    specs.append(("kserve", serving_runtime["spec"], serving_runtime["spec"]["containers"][0]))
    for where, spec, server in specs:
        assert server["securityContext"]["readOnlyRootFilesystem"], where
        mounts = {m["mountPath"]: m for m in server["volumeMounts"]}
        assert not mounts["/tmp"].get("readOnly"), where
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]["name"]], where


def test_no_admin_key_in_the_manifests(rendered, serving_runtime):
    """The operator's key comes from the Secret, by environment, to serve.py and the edge; tritonserver's is
    random per start. No file names a key or a restriction flag."""
    texts = {o: yaml.safe_dump_all(d) for o, d in rendered.items()}
    texts["kserve"] = yaml.safe_dump(serving_runtime)
    for where, text in texts.items():
        for marker in ("restricted-api", "restricted-protocol", "triton-admin-key=", "closed\\n"):
            assert marker not in text, (where, marker)
    for overlay, documents in rendered.items():
        (key,) = [e for e in container(documents, "triton")["env"] if e["name"] == "TRITON_ADMIN_KEY"]
        assert "value" not in key and key["valueFrom"]["secretKeyRef"]["optional"] is True, overlay
