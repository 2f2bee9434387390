#!/usr/bin/env bash
# The test schedule: the one place that says which steps `make test` (what CI's .ci/run runs) and `make pytest`
# run, in what order and side by side. Every step is a make target of its own; this script only orders them,
# gives them their CPU priority and logs each step's start, end and status to build/test-schedule.log.
#
#   scripts/test_schedule.sh test     (make test)
#     prepare   side by side: lint, the venv and its test extras, checkov's venv, the edge's gRPC front
#     then three chains side by side, each waiting on clocks, servers or the network as much as it computes:
#     front     pytest-unbuilt: the unit and server tiers
#     library   the plugin builds at a lower CPU priority (BUILD_NICENESS), so that they take the cores the tests
#               leave idle rather than time from the tests' clocks; one header set after the other, so that
#               ccache serves the second set's kernels from the first's (they include no TensorRT header);
#               then the harness on each build (harness-check) and pytest-library
#     beside    compose-test where a Docker daemon answers (.ci/run provisions one; elsewhere it says why
#               not), then numeric-threads
#   scripts/test_schedule.sh pytest   (make pytest) the same test steps one after another, without lint, the
#     compose test and the numeric rerun: prepare's set-up, front, library.
#
# The library and beside chains write to build/library-tests.log and build/beside-pytest.log, printed after
# the front's output. The status is the first failure's: the front's, the library chain's, the beside chain's.
# Run by the Makefile, which passes MAKE, JOBS, BUILD_DIR, BUILD_NICENESS and CUDA_ARCHITECTURES.
set -uo pipefail
cd "$(dirname "$0")/.."

MAKE=${MAKE:-make}
JOBS=${JOBS:-$(nproc)}
BUILD_DIR=${BUILD_DIR:-build}
BUILD_NICENESS=${BUILD_NICENESS:-5}
CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES:-}
SUBMAKE=("${MAKE}" --no-print-directory)

mkdir -p "${BUILD_DIR}"
TIMING_LOG=${BUILD_DIR}/test-schedule.log
SCHEDULE_START=${SECONDS}

# step NAME COMMAND...: runs COMMAND, appends "NAME start end seconds status" (seconds since the schedule began).
step() {
  local name=$1 start=$((SECONDS - SCHEDULE_START)) status=0
  shift
  "$@" || status=$?
  local end=$((SECONDS - SCHEDULE_START))
  printf '%-16s start %4d s  end %4d s  took %4d s  status %d\n' \
    "${name}" "${start}" "${end}" "$((end - start))" "${status}" >>"${TIMING_LOG}"
  return "${status}"
}

prepare() {
  step prepare "${SUBMAKE[@]}" -j $((JOBS * 2)) "$@"
}

front() {
  step front "${SUBMAKE[@]}" pytest-unbuilt
}

library_chain() {
  step plugin-builds nice -n "${BUILD_NICENESS}" "${SUBMAKE[@]}" harness-check JOBS=$((JOBS * 2)) \
    CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}" \
    && step pytest-library "${SUBMAKE[@]}" pytest-library
}

# Prints why the compose test cannot run here, or nothing when a Docker daemon answers.
compose_unavailable() {
  if ! command -v docker >/dev/null 2>&1; then
    echo "compose-test skipped: no docker command (apt-get install docker.io; bash .ci/run does)"
  elif ! docker info >/dev/null 2>&1; then
    echo "compose-test skipped: no Docker daemon answers (docker info failed; start dockerd)"
  fi
}

beside_chain() {
  local with_compose=$1 status=0 code
  if [[ -n ${with_compose} ]]; then
    step compose-test "${SUBMAKE[@]}" compose-test || status=$?
  fi
  step numeric-threads "${SUBMAKE[@]}" numeric-threads || { code=$?; ((status)) || status=${code}; }
  return "${status}"
}

schedule_test() {
  prepare test-prepare || return $?
  local skipped with_compose=yes
  skipped=$(compose_unavailable)
  if [[ -n ${skipped} ]]; then
    echo "${skipped}"
    with_compose=
  fi
  echo "== beside pytest: the plugin builds, the harness, tests/library (output: ${BUILD_DIR}/library-tests.log)"
  library_chain >"${BUILD_DIR}/library-tests.log" 2>&1 &
  local library=$!
  echo "== beside pytest: ${with_compose:+compose-test, then }numeric-threads (output: ${BUILD_DIR}/beside-pytest.log)"
  beside_chain "${with_compose}" >"${BUILD_DIR}/beside-pytest.log" 2>&1 &
  local beside=$!

  local status=0 library_status=0 beside_status=0
  front || status=$?
  wait "${library}" || library_status=$?
  echo "== the plugin builds, the harness, tests/library (${BUILD_DIR}/library-tests.log)"
  cat "${BUILD_DIR}/library-tests.log"
  wait "${beside}" || beside_status=$?
  echo "== beside pytest (${BUILD_DIR}/beside-pytest.log)"
  cat "${BUILD_DIR}/beside-pytest.log"
  ((status)) || status=${library_status}
  ((status)) || status=${beside_status}
  return "${status}"
}

schedule_pytest() {
  prepare test-venv bytecode test-tools edge-native || return $?
  local status=0 code
  front || status=$?
  library_chain || { code=$?; ((status)) || status=${code}; }
  return "${status}"
}

case ${1:-} in
  test | pytest) ;;
  *)
    echo "usage: scripts/test_schedule.sh test|pytest   (make test, make pytest)" >&2
    exit 2
    ;;
esac
echo "# $1 at $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%FT%TZ), ${JOBS} jobs" >"${TIMING_LOG}"
status=0
"schedule_$1" || status=$?
echo "== steps (${TIMING_LOG})"
cat "${TIMING_LOG}"
exit "${status}"
