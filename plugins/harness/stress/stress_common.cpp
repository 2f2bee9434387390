#include "stress/stress_common.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "conformance/runner.h"
#include "core/plugin_specs.h"

namespace stress
{
using namespace nvinfer1;

std::vector<std::string> const& pluginNames()
{
    static std::vector<std::string> const names = []
    {
        std::vector<std::string> out;
        for (auto const& spec : harness::pluginSpecs()) out.push_back(spec.name);
        return out;
    }();
    return names;
}

void Counts::record(bool pass, std::string const& what, std::string const& detail)
{
    (pass ? mPassed : mFailed) += 1;
    std::printf("%s %s%s%s\n", pass ? "PASS" : "FAIL", what.c_str(),
                detail.empty() ? "" : " :: ", detail.c_str());
    std::fflush(stdout);
}

// ---------------------------------------------------------------- library
LoadedLibrary::LoadedLibrary(std::string const& path, harness::RecordingLogger& logger)
    : mFinder(&logger), mLibrary(path)
{
    mLibrary.setLoggerFinder(&mFinder);
    mLibrary.loadLibrary();
    for (auto const& name : pluginNames())
    {
        if (harness::findCreator(name) == nullptr)
        {
            throw std::runtime_error("no creator trt_plugin_kit::" + name + " v1 after loading " + path);
        }
    }
}

// ---------------------------------------------------------------- cases
int64_t inputElements(harness::Case const& c)
{
    int64_t elements = 0;
    for (auto const& spec : c.inputs)
    {
        elements += harness::volumeOf(spec.dims);
    }
    return elements;
}

// ---------------------------------------------------------------- CUDA

bool requireGpu(std::string const& run, Counts& counts)
{
    if (haveGpu(false)) return true;
    counts.record(false, run, "no CUDA device: the " + run + " run needs a GPU (fuzz needs none)");
    return false;
}

bool haveGpu(bool print)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    {
        cudaGetLastError();
        return false;
    }
    if (print)
    {
        cudaDeviceProp prop{};
        cudaGetDeviceProperties(&prop, 0);
        int driver = 0, runtime = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        std::printf("device: %s (sm_%d%d, %.1f GiB), driver %d, runtime %d\n", prop.name, prop.major,
                    prop.minor, static_cast<double>(prop.totalGlobalMem) / (1 << 30), driver, runtime);
    }
    return true;
}

MemorySample sampleMemory(int64_t cycle)
{
    MemorySample sample;
    sample.cycle = cycle;
    size_t freeBytes = 0, totalBytes = 0;
    cudaOk(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
    sample.gpuUsed = static_cast<int64_t>(totalBytes) - static_cast<int64_t>(freeBytes);
    malloc_trim(0);  // Memory glibc merely keeps cached for reuse is not memory in use.
    std::ifstream statm("/proc/self/statm");
    int64_t sizePages = 0, residentPages = 0;
    statm >> sizePages >> residentPages;
    sample.hostRss = residentPages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
    return sample;
}

harness::Suite const& conformanceSuite()
{
    static harness::Suite const suite = harness::allCases();
    return suite;
}

// ---------------------------------------------------------------- context, watchdog, crash messages
namespace
{
std::mutex gContextMutex;
char gContext[512] = "starting";

void onFatalSignal(int signal)
{
    // Only async-signal-safe calls: write the context, then die of the same signal.
    char const prefix[] = "\nFAIL crash (signal) during: ";
    ssize_t ignored = write(STDOUT_FILENO, prefix, sizeof(prefix) - 1);
    ignored = write(STDOUT_FILENO, gContext, strnlen(gContext, sizeof(gContext)));
    ignored = write(STDOUT_FILENO, "\n", 1);
    (void)ignored;
    std::signal(signal, SIG_DFL);
    std::raise(signal);
}

#if defined(__SANITIZE_ADDRESS__)
extern "C" void __sanitizer_set_death_callback(void (*callback)(void));
void onSanitizerDeath()
{
    std::printf("\nFAIL sanitizer error during: %s\n", gContext);
    std::fflush(stdout);
}
#endif
}  // namespace

void setContext(std::string const& text)
{
    std::lock_guard<std::mutex> lock(gContextMutex);
    std::snprintf(gContext, sizeof(gContext), "%s", text.c_str());
}

void startWatchdog(double seconds)
{
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_set_death_callback(onSanitizerDeath);  // AddressSanitizer reports SIGSEGV itself.
    for (int signal : {SIGFPE, SIGILL, SIGABRT})
#else
    for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
#endif
    {
        std::signal(signal, onFatalSignal);
    }
    if (seconds <= 0)
    {
        return;
    }
    std::thread(
        [seconds]
        {
            std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
            std::string context;
            {
                std::lock_guard<std::mutex> lock(gContextMutex);
                context = gContext;
            }
            std::printf(
                "FAIL time limit of %.0f s exceeded (a hang?) during: %s\nstress: time limit exceeded\n",
                seconds, context.c_str());
            std::fflush(stdout);
            std::_Exit(3);
        })
        .detach();
}

}  // namespace stress
