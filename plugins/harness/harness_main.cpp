// plugin_harness: loads libtrt_plugin_kit.so the way Triton does (dlopen; the static initializer registers
// the creators with "TensorRT's" registry, here ours), then the way IPluginRegistry::loadLibrary does
// (setLoggerFinder + getCreators), and drives every plugin through TensorRT's call sequence.
//
//   plugin_harness --library build/libtrt_plugin_kit.so [--cpu-only] [--filter TEXT] [--dump DIR] [--verbose]
//
// Without a CUDA device only the checks that need no GPU run (fields, shapes, formats, serialize round trip).
// The last line is "harness: N passed, M failed"; the exit code is non-zero when anything failed.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "cases.h"
#include "runner.h"
#include "trt_fakes.h"

using namespace harness;

namespace
{
struct Counts
{
    int passed{0};
    int failed{0};
    void record(bool pass, std::string const& what, std::string const& detail)
    {
        (pass ? passed : failed) += 1;
        std::printf("%s %s%s%s\n", pass ? "PASS" : "FAIL", what.c_str(),
                    detail.empty() ? "" : " :: ", detail.c_str());
        std::fflush(stdout);
    }
};

bool matches(std::string const& filter, std::string const& text)
{
    return filter.empty() || text.find(filter) != std::string::npos;
}

int usage()
{
    std::fprintf(stderr,
                 "usage: plugin_harness --library PATH [--cpu-only] [--filter TEXT] [--max-elements N] "
                 "[--dump DIR] [--verbose]\n");
    return 2;
}
}  // namespace

int main(int argc, char** argv)
{
    std::string library, filter;
    int64_t maxElements = -1;  // --max-elements: skip larger cases (sanitizer runs are 10-100x slower)
    RunOptions options;
    bool cpuOnly = false, verbose = false;
    for (int i = 1; i < argc; ++i)
    {
        std::string const arg = argv[i];
        auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (arg == "--library")
            library = value();
        else if (arg == "--filter")
            filter = value();
        else if (arg == "--dump")
            options.dumpDir = value();
        else if (arg == "--max-elements")
            maxElements = std::atoll(value().c_str());
        else if (arg == "--cpu-only")
            cpuOnly = true;
        else if (arg == "--verbose")
            verbose = true;
        else
            return usage();
    }
    if (library.empty()) return usage();

    int deviceCount = 0;
    options.gpu = !cpuOnly && cudaGetDeviceCount(&deviceCount) == cudaSuccess && deviceCount > 0;
    if (options.gpu)
    {
        cudaDeviceProp prop{};
        cudaGetDeviceProperties(&prop, 0);
        int driver = 0, runtime = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        std::printf("device: %s (sm_%d%d), driver %d, runtime %d\n", prop.name, prop.major, prop.minor,
                    driver, runtime);
    }
    else
    {
        cudaGetLastError();
        std::printf(
            "no CUDA device%s: running the checks that need no GPU (fields, shapes, formats, serialize round "
            "trip)\n",
            cpuOnly ? " (--cpu-only)" : "");
    }

    Counts counts;
    RecordingLogger logger;
    logger.setEcho(verbose);
    HarnessLoggerFinder finder(&logger);

    // ---- 1. dlopen, as Triton's TensorRT backend or LD_PRELOAD: the static initializer registers.
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr)
    {
        std::printf("FAIL dlopen %s :: %s\nharness: 0 passed, 1 failed\n", library.c_str(), dlerror());
        return 1;
    }
    std::set<std::string> const expectedNames{"L2Normalize",    "PReLU", "LeakyReLU",
                                              "FullyConnected", "Pool",  "ConcatCopy"};
    auto registeredNames = []
    {
        std::set<std::string> names;
        int32_t n = 0;
        auto* const* creators = HarnessRegistry::instance().getAllCreators(&n);
        for (int32_t i = 0; i < n; ++i)
        {
            if (auto* v3 = asV3Creator(creators[i]))
                names.insert(std::string(v3->getPluginNamespace()) + "::" + v3->getPluginName() + "@" +
                             v3->getPluginVersion());
        }
        return names;
    };
    std::set<std::string> expectedKeys;
    for (auto const& n : expectedNames) expectedKeys.insert("trt_plugin_kit::" + n + "@1");
    counts.record(
        registeredNames() == expectedKeys && HarnessRegistry::instance().size() == expectedKeys.size(),
        "registry: static registration on dlopen",
        std::to_string(HarnessRegistry::instance().size()) + " creators");

    // ---- 2. the loadLibrary path: exported entry points, logger hand-over, no duplicate registration.
    using SetLoggerFinder = void (*)(nvinfer1::ILoggerFinder*);
    auto setLoggerFinder = reinterpret_cast<SetLoggerFinder>(dlsym(handle, "setLoggerFinder"));
    bool const exported = setLoggerFinder != nullptr && dlsym(handle, "getCreators") != nullptr;
    if (setLoggerFinder) setLoggerFinder(&finder);
    auto* loaded = HarnessRegistry::instance().loadLibrary(library.c_str());
    counts.record(exported && loaded != nullptr && registeredNames() == expectedKeys &&
                      HarnessRegistry::instance().size() == expectedKeys.size(),
                  "registry: setLoggerFinder/getCreators exported, loadLibrary registers each creator once",
                  "");

    // ---- 3. field declarations
    for (auto const& name : expectedNames)
    {
        auto* creator = findCreator(name);
        auto const* fc = creator ? creator->getFieldNames() : nullptr;
        bool ok = fc != nullptr && fc->nbFields >= 0 && (fc->nbFields == 0 || fc->fields != nullptr);
        std::string names;
        for (int32_t i = 0; ok && i < fc->nbFields; ++i)
        {
            ok = fc->fields[i].name != nullptr;
            names += std::string(i ? "," : "") + (ok ? fc->fields[i].name : "?");
        }
        counts.record(ok, "getFieldNames " + name, names);
    }

    // ---- 4. the suites
    Suite suite;
    addL2NormalizeCases(suite);
    addActivationCases(suite);
    addFullyConnectedCases(suite);
    addPoolCases(suite);
    addConcatCopyCases(suite);

    int index = 0;
    for (auto& c : suite.cases)
    {
        std::string const what = c.plugin + " " + c.label;
        int64_t elements = 0;
        for (auto const& spec : c.inputs) elements += volumeOf(spec.dims);
        if (matches(filter, what) && (maxElements < 0 || elements <= maxElements))
        {
            Result r = runCase(c, options, logger, index);
            counts.record(r.pass, what, r.detail);
        }
        ++index;
    }
    for (auto& r : suite.rejects)
    {
        std::string const what = r.plugin + " rejects " + r.label;
        if (matches(filter, what))
        {
            Result res = runReject(r, logger);
            counts.record(res.pass, what, res.detail);
        }
    }
    for (auto& s : suite.shapeErrors)
    {
        std::string const what = s.plugin + " reports " + s.label;
        if (matches(filter, what))
        {
            Result res = runShapeError(s, logger);
            counts.record(res.pass, what, res.detail);
        }
    }

    if (setLoggerFinder) setLoggerFinder(nullptr);
    HarnessRegistry::instance().deregisterLibrary(loaded);
    std::printf("harness: %d passed, %d failed\n", counts.passed, counts.failed);
    return counts.failed == 0 ? 0 : 1;
}
