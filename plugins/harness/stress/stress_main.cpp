// plugin_stress: reliability runs for libtrt_plugin_kit.so on top of the conformance harness (see STRESS.md).
//
//   plugin_stress fuzz        --library LIB [--iterations 10000] [--seed 1] [--plugin NAME]   (no GPU needed)
//   plugin_stress lifecycle   --library LIB [--cycles 10000] [--plugin NAME]                  (GPU)
//   plugin_stress concurrency --library LIB [--threads 8] [--iterations 200] [--plugin NAME]  (GPU)
//
// Prints PASS/FAIL lines and a final "stress: N passed, M failed"; exit status 0 when everything passed,
// 1 when something failed, 2 for a bad command line or a library that does not load, 3 past --time-limit.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "stress/stress_common.h"

using namespace stress;

namespace
{
char const* const kUsage = R"(usage: plugin_stress SUBCOMMAND --library PATH [options]

Subcommands (see plugins/harness/STRESS.md):
  fuzz         generated field collections for every creator, in kBUILD and kRUNTIME; accepted plugins go
               through the serialize round trip, build calls with a plausible shape and random shapes.
               Needs no GPU.
  lifecycle    create(kRUNTIME) -> attach -> onShapeChange -> enqueue -> destroy cycles per plugin, with
               device memory (cudaMemGetInfo) and host RSS sampled; fails on growth past the bounds. GPU.
  concurrency  threads with their own attached clone and stream enqueue the same plugin at once with
               different data; every output checked against the float64 reference. GPU.

Common options:
  --library PATH         libtrt_plugin_kit.so (required)
  --plugin NAME          only this plugin (the list below: every plugins/*/spec.yaml of this build)
  --time-limit SECONDS   fail (exit 3) if the run takes longer; 0 = none (default 1800)
  --verbose              print every message the library logs

fuzz:
  --iterations N         field collections per creator (default 10000)
  --seed S               generator seed (default 1); a failure prints its seed and iteration
  --iteration I          rerun only iteration I (with --seed and --plugin), printing the collection
  --build-sample N       run the build calls with a plausible shape on 1 in N accepted plugins (default 4)
  --shape-trials N       random-shape trials per accepted plugin (default 2)

lifecycle:
  --cycles N             cycles per plugin (default 10000)
  --warmup N             cycles before the baseline sample (default max(20, cycles/10))
  --sample-every N       sample memory every N cycles (default cycles/20)
  --gpu-bound-mib X      largest growth of device memory in use after the warm-up (default 2)
  --host-bound-mib X     largest growth of the resident set after the warm-up (default 8)
  --no-memory-bounds     print the samples but do not judge them (sanitizer runs)
  --max-elements N       the plugin's first FP32 case with at most N input elements (default 65536)

concurrency:
  --threads N            threads, each with its own attached clone and stream (default 8)
  --iterations N         enqueues per thread and case (default 200)
  --max-elements N       cases with at most N input elements (default 65536)
  --max-cases-per-plugin N   at most N cases per plugin, one of each input type first (default: all)
  --datasets N           distinct input sets per thread (default 3)
)";

int usage(std::string const& problem)
{
    if (!problem.empty())
    {
        std::fprintf(stderr, "plugin_stress: %s\n\n", problem.c_str());
    }
    std::fputs(kUsage, stderr);
    // From the specs the tools were built with, so that a new plugin folder is listed without an edit here.
    std::string names;
    for (auto const& name : pluginNames()) names += (names.empty() ? "" : ", ") + name;
    std::fprintf(stderr, "\nplugins: %s\n", names.c_str());
    return 2;
}

bool parseInt(std::string const& text, int64_t& out)
{
    char* end = nullptr;
    errno = 0;
    long long const value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0) return false;
    out = value;
    return true;
}

bool parseDouble(std::string const& text, double& out)
{
    char* end = nullptr;
    double const value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0') return false;
    out = value;
    return true;
}

//! What the command line asks for: the subcommand, the common options and each subcommand's own.
struct Settings
{
    std::string command, library, plugin;
    double timeLimit = 1800;
    bool verbose = false;
    FuzzOptions fuzz;
    LifecycleOptions lifecycle;
    ConcurrencyOptions concurrency;
};

// Options by subcommand: name -> setter returning false on a bad value.
using Setter = std::function<bool(std::string const&)>;
using Setters = std::map<std::string, Setter>;

Setter positive(int64_t& target, int64_t minimum)
{
    return [&target, minimum](std::string const& v)
    {
        int64_t n = 0;
        if (!parseInt(v, n) || n < minimum) return false;
        target = n;
        return true;
    };
}

Setter positive32(int32_t& target, int64_t minimum)
{
    return [&target, minimum](std::string const& v)
    {
        int64_t n = 0;
        if (!parseInt(v, n) || n < minimum || n > (int64_t{1} << 30)) return false;
        target = static_cast<int32_t>(n);
        return true;
    };
}

Setter real(double& target)
{
    return [&target](std::string const& v) { return parseDouble(v, target) && target >= 0; };
}

Setter nonEmpty(std::string& target)
{
    return [&target](std::string const& v)
    {
        target = v;
        return !v.empty();
    };
}

//! The options settings.command takes (besides --verbose and lifecycle's --no-memory-bounds), writing into
//! it.
Setters optionSetters(Settings& settings)
{
    Setters options{{"--library", nonEmpty(settings.library)},
                    {"--plugin", nonEmpty(settings.plugin)},
                    {"--time-limit", real(settings.timeLimit)}};
    if (settings.command == "fuzz")
    {
        FuzzOptions& fuzz = settings.fuzz;
        options["--iterations"] = positive(fuzz.iterations, 1);
        options["--seed"] = [&fuzz](std::string const& v)
        {
            int64_t n = 0;
            if (!parseInt(v, n) || n < 0) return false;
            fuzz.seed = static_cast<uint64_t>(n);
            return true;
        };
        options["--iteration"] = positive(fuzz.onlyIteration, 0);
        options["--build-sample"] = positive32(fuzz.buildSampleEvery, 0);
        options["--shape-trials"] = positive32(fuzz.shapeTrials, 0);
    }
    else if (settings.command == "lifecycle")
    {
        LifecycleOptions& lifecycle = settings.lifecycle;
        options["--cycles"] = positive(lifecycle.cycles, 2);
        options["--warmup"] = positive(lifecycle.warmup, 0);
        options["--sample-every"] = positive(lifecycle.sampleEvery, 1);
        options["--gpu-bound-mib"] = real(lifecycle.gpuBoundMiB);
        options["--host-bound-mib"] = real(lifecycle.hostBoundMiB);
        options["--max-elements"] = positive(lifecycle.maxElements, 1);
    }
    else
    {
        ConcurrencyOptions& concurrency = settings.concurrency;
        options["--threads"] = positive32(concurrency.threads, 1);
        options["--iterations"] = positive(concurrency.iterations, 1);
        options["--max-elements"] = positive(concurrency.maxElements, 1);
        options["--max-cases-per-plugin"] = positive32(concurrency.maxCasesPerPlugin, 0);
        options["--datasets"] = positive32(concurrency.datasetsPerThread, 1);
    }
    return options;
}

//! Reads the options after the subcommand into settings; returns what is wrong with them, or "".
std::string parseOptions(int argc, char** argv, Settings& settings)
{
    Setters const options = optionSetters(settings);
    for (int i = 2; i < argc; ++i)
    {
        std::string const arg = argv[i];
        if (arg == "--verbose")
        {
            settings.verbose = true;
            continue;
        }
        if (arg == "--no-memory-bounds" && settings.command == "lifecycle")
        {
            settings.lifecycle.checkBounds = false;
            continue;
        }
        auto it = options.find(arg);
        if (it == options.end()) return "unknown option '" + arg + "' for " + settings.command;
        if (i + 1 >= argc) return arg + " needs a value";
        std::string const value = argv[++i];
        if (!it->second(value)) return "bad value '" + value + "' for " + arg;
    }
    if (settings.library.empty()) return "--library is required";
    if (!settings.plugin.empty())
    {
        bool known = false;
        for (auto const& name : pluginNames()) known = known || name == settings.plugin;
        if (!known) return "unknown plugin '" + settings.plugin + "'";
    }
    if (settings.fuzz.onlyIteration >= 0 && settings.plugin.empty())
    {
        return "--iteration needs --plugin (a failure line names both)";
    }
    settings.fuzz.plugin = settings.lifecycle.plugin = settings.concurrency.plugin = settings.plugin;
    settings.fuzz.verbose = settings.verbose;
    return "";
}

//! Loads the library and runs the subcommand; the exit status (see the top of this file).
int run(Settings const& settings)
{
    startWatchdog(settings.timeLimit);
    bool const gpu = haveGpu(true);
    if (!gpu) std::printf("no CUDA device\n");

    harness::RecordingLogger logger;
    logger.setEcho(settings.verbose);
    Counts counts;
    try
    {
        LoadedLibrary loaded(settings.library, logger);
        if (settings.command == "fuzz")
            runFuzz(settings.fuzz, logger, counts);
        else if (settings.command == "lifecycle")
            runLifecycle(settings.lifecycle, logger, counts);
        else
            runConcurrency(settings.concurrency, logger, counts);
    }
    catch (std::exception const& e)
    {
        std::printf("FAIL %s :: %s\nstress: %d passed, %d failed\n", settings.command.c_str(), e.what(),
                    counts.passed(), counts.failed() + 1);
        return 2;
    }
    if (gpu)
    {
        cudaDeviceReset();  // Destroys the context: compute-sanitizer's leak check reports what is left.
    }
    std::printf("stress: %d passed, %d failed\n", counts.passed(), counts.failed());
    return counts.failed() == 0 ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv)
{
    if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)
    {
        return usage(argc < 2 ? "missing subcommand" : "");
    }
    Settings settings;
    settings.command = argv[1];
    if (settings.command != "fuzz" && settings.command != "lifecycle" && settings.command != "concurrency")
    {
        return usage("unknown subcommand '" + settings.command + "'");
    }
    std::string const problem = parseOptions(argc, argv, settings);
    if (!problem.empty()) return usage(problem);
    return run(settings);
}
