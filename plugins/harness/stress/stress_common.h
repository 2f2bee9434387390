// Shared pieces of plugin_stress (see STRESS.md): loading the library as TensorRT does, counting results,
// owning plugins, building tensor descriptions, comparing outputs with float64 references, sampling memory.
// CUDA resources and the library loader come from tool_support.h (shared with plugin_harness).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "conformance/cases.h"
#include "core/sequence.h"
#include "core/tool_support.h"
#include "core/trt_fakes.h"

namespace stress
{

//! The plugins of the library (one per plugin folder's spec), in the order every subcommand runs them.
std::vector<std::string> const& pluginNames();

//! PASS/FAIL lines on stdout and the totals of the final "stress: N passed, M failed" line.
class Counts
{
public:
    void record(bool pass, std::string const& what, std::string const& detail);
    int passed() const { return mPassed; }
    int failed() const { return mFailed; }

private:
    int mPassed{0};
    int mFailed{0};
};

//! The library loaded the way Triton and IPluginRegistry::loadLibrary load it (see harness_main.cpp):
//! dlopen (the static initializer registers the creators), setLoggerFinder, then loadLibrary.
class LoadedLibrary
{
public:
    //! Throws std::runtime_error with the reason when the library cannot be loaded or lacks a creator.
    LoadedLibrary(std::string const& path, harness::RecordingLogger& logger);

private:
    harness::HarnessLoggerFinder mFinder;  // outlives mLibrary, which hands it back on destruction
    harness::PluginLibrary mLibrary;
};

// The TensorRT-call helpers live in sequence.h (shared with plugin_harness).
using harness::Capabilities;
using harness::capabilitiesOf;
using harness::cudaOk;
using harness::dynamicDescs;
using harness::errorsLogged;
using harness::isIntegerType;
using harness::maxError;
using harness::PluginPtr;
using harness::runtimeDescs;

int64_t inputElements(harness::Case const& c);

//! Whether a CUDA device is usable; prints the device line when it is.
bool haveGpu(bool print);
//! For the runs that need a GPU: true when one is usable, else records `run` failed, saying so.
bool requireGpu(std::string const& run, Counts& counts);

//! Device memory in use (total - free) and this process's resident set (after malloc_trim), both in bytes.
struct MemorySample
{
    int64_t cycle{0};
    int64_t gpuUsed{0};
    int64_t hostRss{0};
};
MemorySample sampleMemory(int64_t cycle);

using harness::DeviceMemory;
using harness::DeviceTensors;
using harness::Stream;

//! The conformance suite (every plugin folder's registered cases), built once.
harness::Suite const& conformanceSuite();

//! Per-subcommand context: which step is running, for the crash and time-limit messages.
void setContext(std::string const& text);
//! Exits with a FAIL line if the whole run takes longer than `seconds` (0: no limit). Also installs
//! handlers that print the current context on a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT).
void startWatchdog(double seconds);

// ---- subcommands (stress_fuzz.cpp, stress_lifecycle.cpp, stress_concurrency.cpp)

struct FuzzOptions
{
    int64_t iterations{10000};
    uint64_t seed{1};
    std::string plugin;           // empty: every creator
    int64_t onlyIteration{-1};    // >= 0: run just that iteration (reproduce a failure), verbose
    int32_t buildSampleEvery{4};  // accepted collections whose build calls run with a plausible shape: 1 in N
    int32_t shapeTrials{2};  // random getOutputShapes/configurePlugin/onShapeChange calls per accepted plugin
    bool verbose{false};
};
void runFuzz(FuzzOptions const& options, harness::RecordingLogger& logger, Counts& counts);

struct LifecycleOptions
{
    int64_t cycles{10000};
    std::string plugin;
    int64_t sampleEvery{0};  // 0: cycles / 20
    int64_t warmup{-1};      // -1: max(20, cycles / 10)
    double gpuBoundMiB{2.0};
    double hostBoundMiB{8.0};
    bool checkBounds{true};
    int64_t maxElements{65536};
};
void runLifecycle(LifecycleOptions const& options, harness::RecordingLogger& logger, Counts& counts);

struct ConcurrencyOptions
{
    int32_t threads{8};
    int64_t iterations{200};
    std::string plugin;
    int64_t maxElements{65536};
    int32_t maxCasesPerPlugin{0};  // 0: every case of at most maxElements input elements
    int32_t datasetsPerThread{3};
};
void runConcurrency(ConcurrencyOptions const& options, harness::RecordingLogger& logger, Counts& counts);

}  // namespace stress
