// plugin_harness: loads libtrt_plugin_kit.so the way Triton does (dlopen; the static initializer registers
// the creators with "TensorRT's" registry, here ours), then the way IPluginRegistry::loadLibrary does
// (setLoggerFinder + getCreators), and drives every plugin through TensorRT's call sequence.
//
//   plugin_harness --library build/libtrt_plugin_kit.so [--cpu-only] [--filter TEXT] [--dump DIR] [--verbose]
//   plugin_harness --library build/libtrt_plugin_kit.so --describe    (JSON: what each creator declares)
//
// Without a CUDA device only the checks that need no GPU run (fields, shapes, formats, serialize round trip).
// The plugins expected, and their field declarations, come from plugins/*/spec.yaml (plugin_specs.h).
// The last line is "harness: N passed, M failed"; the exit code is non-zero when anything failed.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <string>

#include "conformance/cases.h"
#include "conformance/runner.h"
#include "core/plugin_specs.h"
#include "core/sequence.h"
#include "core/tool_support.h"
#include "core/trt_fakes.h"

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
                 "[--dump DIR] [--verbose] | --library PATH --describe\n");
    return 2;
}

char const* fieldTypeName(nvinfer1::PluginFieldType type)
{
    switch (type)
    {
        case nvinfer1::PluginFieldType::kFLOAT32:
            return "float32";
        case nvinfer1::PluginFieldType::kINT32:
            return "int32";
        case nvinfer1::PluginFieldType::kCHAR:
            return "char";
        default:
            return "other";
    }
}

//! The declared fields as "name:type:length,..." (the form the spec check compares).
std::string declaredFields(nvinfer1::PluginFieldCollection const* fc)
{
    std::string out;
    for (int32_t i = 0; fc != nullptr && i < fc->nbFields; ++i)
    {
        nvinfer1::PluginField const& f = fc->fields[i];
        out += std::string(i ? "," : "") + (f.name ? f.name : "?") + ":" + fieldTypeName(f.type) + ":" +
               std::to_string(f.length);
    }
    return out;
}

std::string declaredFields(PluginSpec const& spec)
{
    std::string out;
    for (size_t i = 0; i < spec.fields.size(); ++i)
    {
        FieldSpec const& f = spec.fields[i];
        out +=
            std::string(i ? "," : "") + f.name + ":" + fieldTypeName(f.type) + ":" + std::to_string(f.length);
    }
    return out;
}

//! Tensor types as the specs name them.
std::string specTypeName(nvinfer1::DataType type)
{
    switch (type)
    {
        case nvinfer1::DataType::kFLOAT:
            return "float32";
        case nvinfer1::DataType::kHALF:
            return "float16";
        case nvinfer1::DataType::kBF16:
            return "bfloat16";
        default:
            return typeName(type);
    }
}

std::string jsonString(std::string const& text)
{
    std::string out = "\"";
    for (char c : text)
    {
        if (c == '"' || c == '\\') out += '\\';
        out += (static_cast<unsigned char>(c) < 32) ? ' ' : c;
    }
    return out + "\"";
}

//! A plugin built from the spec's example (required fields only): what it serializes (its defaults) and the
//! types it accepts for input 0 in the linear format, as JSON members.
std::string describeExample(nvinfer1::IPluginCreatorV3One* creator, PluginSpec const& spec,
                            RecordingLogger& logger)
{
    FieldSet example = spec.example;
    logger.take();
    PluginPtr plugin(
        creator->createPlugin("describe", example.collection(), nvinfer1::TensorRTPhase::kBUILD));
    if (!plugin) return "\"example_error\": " + jsonString(errorsLogged(logger));
    std::string problem;
    Capabilities caps = capabilitiesOf(plugin.get(), spec.name, problem);
    if (!problem.empty()) return "\"example_error\": " + jsonString(problem);
    FieldSet serialized;
    nvinfer1::PluginFieldCollection const* fc = caps.runtime->getFieldsToSerialize();
    for (int32_t i = 0; fc != nullptr && i < fc->nbFields; ++i)
    {
        nvinfer1::PluginField const& f = fc->fields[i];
        auto const* bytes = static_cast<uint8_t const*>(f.data);
        size_t const size = static_cast<size_t>(f.length) * fieldTypeSize(f.type);
        serialized.addRaw(f.name, f.type, std::vector<uint8_t>(bytes, bytes + size), f.length);
    }
    int32_t const nbIn = static_cast<int32_t>(spec.inputTypes.size());
    std::string types;
    for (auto type : {nvinfer1::DataType::kFLOAT, nvinfer1::DataType::kHALF, nvinfer1::DataType::kINT8,
                      nvinfer1::DataType::kINT32, nvinfer1::DataType::kBOOL, nvinfer1::DataType::kUINT8,
                      nvinfer1::DataType::kBF16, nvinfer1::DataType::kINT64})
    {
        std::vector<TensorSpec> all(static_cast<size_t>(nbIn + spec.nbOutputs),
                                    TensorSpec{type, makeDims({2, 3})});
        auto descs = dynamicDescs(all);
        if (caps.build->supportsFormatCombination(0, descs.data(), nbIn, spec.nbOutputs))
            types += std::string(types.empty() ? "" : ", ") + "\"" + specTypeName(type) + "\"";
    }
    logger.take();
    return "\"serialized\": " + serialized.toJson() + ", \"input0_types\": [" + types + "]";
}

//! --describe: every registered creator as JSON (names, declared fields, what the spec's example builds).
int describe(RecordingLogger& logger)
{
    int32_t n = 0;
    auto* const* creators = HarnessRegistry::instance().getAllCreators(&n);
    std::ostringstream out;
    out << "{\"creators\": [";
    for (int32_t i = 0; i < n; ++i)
    {
        auto* v3 = asV3Creator(creators[i]);
        if (v3 == nullptr) continue;
        out << (i ? ",\n  " : "\n  ") << "{\"name\": " << jsonString(v3->getPluginName())
            << ", \"version\": " << jsonString(v3->getPluginVersion())
            << ", \"namespace\": " << jsonString(v3->getPluginNamespace()) << ", \"fields\": [";
        nvinfer1::PluginFieldCollection const* fc = v3->getFieldNames();
        for (int32_t f = 0; fc != nullptr && f < fc->nbFields; ++f)
        {
            out << (f ? ", " : "")
                << "{\"name\": " << jsonString(fc->fields[f].name ? fc->fields[f].name : "")
                << ", \"type\": \"" << fieldTypeName(fc->fields[f].type)
                << "\", \"length\": " << fc->fields[f].length << "}";
        }
        out << "]";
        for (auto const& spec : pluginSpecs())
            if (spec.name == v3->getPluginName()) out << ", " << describeExample(v3, spec, logger);
        out << "}";
    }
    out << "\n]}\n";
    std::fputs(out.str().c_str(), stdout);
    return 0;
}
//! The command line; parse() is false on anything unknown or without --library.
struct Arguments
{
    std::string library, filter;
    int64_t maxElements = -1;  // --max-elements: skip larger cases (sanitizer runs are 10-100x slower)
    RunOptions options;
    bool cpuOnly = false, verbose = false, describeOnly = false;

    bool parse(int argc, char** argv)
    {
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
            else if (arg == "--describe")
                describeOnly = true;
            else
                return false;
        }
        return !library.empty();
    }
};

//! --describe: loads the library as loadLibrary does and prints what each creator declares.
int describeLibrary(std::string const& library)
{
    RecordingLogger logger;
    HarnessLoggerFinder finder(&logger);
    try
    {
        PluginLibrary plugins(library);
        plugins.setLoggerFinder(&finder);
        plugins.loadLibrary();
        return describe(logger);
    }
    catch (std::exception const& e)
    {
        std::fprintf(stderr, "plugin_harness: %s\n", e.what());
        return 1;
    }
}

//! Whether the GPU checks run (a device, and no --cpu-only); prints the device or why they do not.
bool announceDevice(bool cpuOnly)
{
    int deviceCount = 0;
    bool const gpu = !cpuOnly && cudaGetDeviceCount(&deviceCount) == cudaSuccess && deviceCount > 0;
    if (gpu)
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
    return gpu;
}

//! "namespace::name@version" of every V3 creator registered.
std::set<std::string> registeredKeys()
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
}

//! Steps 2 and 3 of the call sequence, on a library already dlopen()ed (step 1, which registers): the
//! loadLibrary path, then each creator's field declarations against its spec.yaml.
void checkRegistration(PluginLibrary& plugins, HarnessLoggerFinder& finder, Counts& counts)
{
    std::set<std::string> expectedKeys;  // one creator per plugin folder's spec
    for (auto const& spec : pluginSpecs())
        expectedKeys.insert("trt_plugin_kit::" + spec.name + "@" + spec.version);
    auto const registeredOnce = [&expectedKeys]
    { return registeredKeys() == expectedKeys && HarnessRegistry::instance().size() == expectedKeys.size(); };
    counts.record(registeredOnce(), "registry: static registration on dlopen",
                  std::to_string(HarnessRegistry::instance().size()) + " creators");

    // ---- 2. the loadLibrary path: exported entry points, logger hand-over, no duplicate registration.
    bool const exported = plugins.exportsEntryPoints();
    std::string loadProblem;
    try
    {
        plugins.setLoggerFinder(&finder);
        plugins.loadLibrary();
    }
    catch (std::exception const& e)
    {
        loadProblem = e.what();
    }
    counts.record(exported && loadProblem.empty() && registeredOnce(),
                  "registry: setLoggerFinder/getCreators exported, loadLibrary registers each creator once",
                  loadProblem);

    // ---- 3. field declarations: names, types and lengths as the plugin's spec.yaml lists them
    for (auto const& spec : pluginSpecs())
    {
        auto* creator = findCreator(spec.name);
        auto const* fc = creator ? creator->getFieldNames() : nullptr;
        bool ok = fc != nullptr && fc->nbFields >= 0 && (fc->nbFields == 0 || fc->fields != nullptr);
        std::string const declared = ok ? declaredFields(fc) : "no field declarations";
        ok = ok && declared == declaredFields(spec);
        counts.record(ok, "getFieldNames " + spec.name + " matches its spec",
                      ok ? declared : "declared " + declared + ", spec " + declaredFields(spec));
    }
}

//! Step 4: every case, reject and shape error the filter (and --max-elements) lets through.
void runSuites(Arguments const& args, RecordingLogger& logger, Counts& counts)
{
    Suite suite = allCases();
    int index = 0;
    for (auto& c : suite.cases)
    {
        std::string const what = c.plugin + " " + c.label;
        int64_t elements = 0;
        for (auto const& spec : c.inputs) elements += volumeOf(spec.dims);
        if (matches(args.filter, what) && (args.maxElements < 0 || elements <= args.maxElements))
        {
            Result r = runCase(c, args.options, logger, index);
            counts.record(r.pass, what, r.detail);
        }
        ++index;
    }
    for (auto& r : suite.rejects)
    {
        std::string const what = r.plugin + " rejects " + r.label;
        if (matches(args.filter, what))
        {
            Result res = runReject(r, logger);
            counts.record(res.pass, what, res.detail);
        }
    }
    for (auto& s : suite.shapeErrors)
    {
        std::string const what = s.plugin + " reports " + s.label;
        if (matches(args.filter, what))
        {
            Result res = runShapeError(s, logger);
            counts.record(res.pass, what, res.detail);
        }
    }
}
}  // namespace

int main(int argc, char** argv)
{
    Arguments args;
    if (!args.parse(argc, argv)) return usage();
    if (args.describeOnly) return describeLibrary(args.library);
    args.options.gpu = announceDevice(args.cpuOnly);

    Counts counts;
    RecordingLogger logger;
    logger.setEcho(args.verbose);
    HarnessLoggerFinder finder(&logger);

    // ---- 1. dlopen, as Triton's TensorRT backend or LD_PRELOAD: the static initializer registers.
    std::unique_ptr<PluginLibrary> plugins;
    try
    {
        plugins = std::make_unique<PluginLibrary>(args.library);
    }
    catch (std::exception const& e)
    {
        std::printf("FAIL %s\nharness: 0 passed, 1 failed\n", e.what());
        return 1;
    }
    checkRegistration(*plugins, finder, counts);
    runSuites(args, logger, counts);

    plugins.reset();  // hands the logger back, closes loadLibrary's handle
    std::printf("harness: %d passed, %d failed\n", counts.passed, counts.failed);
    return counts.failed == 0 ? 0 : 1;
}
