// Shared by libplugin_bench.so's sources (plugin_bench.cpp, bench_chain.cpp): errors, parsing of the C API's
// specs, TensorRT's build sequence through the harness's fakes, GPU resources, statistics, the output check.
// Header-only (inline): the library is these few translation units, built together.
#pragma once

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_kernels.h"
#include "cases.h"
#include "host_tensor.h"
#include "sequence.h"
#include "trt_fakes.h"

namespace tpk_bench
{
using namespace nvinfer1;
using harness::TensorSpec;

//! Indices of the `results` array.
enum Result : int
{
    kMedianUs = 0,
    kP10Us,
    kP90Us,
    kMinUs,
    kMaxUs,
    kMeanUs,
    kSamples,
    kRotationSets,
    kInputBytes,   // per enqueue, all inputs
    kOutputBytes,  // per enqueue, all outputs
    kWorkspaceBytes,
    kL2Bytes,
    kGraphs,
    kRotationBytes,    // inputs of all rotating sets together
    kTactic,           // the tactic chosen (0: the plugin's default; NaN: the plugin has no tactics)
    kTacticUs,         // its time when chosen (the tactic timing, not the measurement)
    kDefaultTacticUs,  // tactic 0's time, timed the same way
    kResultCount
};

constexpr size_t kPitchAlignment = 256;

struct BenchError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

template <typename... Parts>
[[noreturn]] void fail(Parts const&... parts)
{
    std::ostringstream out;
    (out << ... << parts);
    throw BenchError(out.str());
}

inline void cudaOk(cudaError_t status, char const* what)
{
    if (status != cudaSuccess)
    {
        cudaGetLastError();  // Clears a non-sticky error so that the next case can run.
        fail(what, ": ", cudaGetErrorString(status));
    }
}

inline harness::RecordingLogger& logger()
{
    static harness::RecordingLogger* instance = new harness::RecordingLogger();
    return *instance;
}

inline std::string errorsLogged()
{
    std::string all;
    for (auto const& e : logger().take())
    {
        if (e.severity <= ILogger::Severity::kERROR)
        {
            all += (all.empty() ? "" : " | ") + e.message;
        }
    }
    return all.empty() ? "(nothing logged)" : all;
}

inline void writeMessage(char* message, int length, std::string const& text)
{
    if (message != nullptr && length > 0)
    {
        std::snprintf(message, static_cast<size_t>(length), "%s", text.c_str());
    }
}

//! Runs `body`, turning every exception into a non-zero return and a message.
template <typename Body>
inline int guarded(char* message, int messageLength, Body&& body) noexcept
{
    try
    {
        std::string text;
        body(text);
        writeMessage(message, messageLength, text);
        return 0;
    }
    catch (std::exception const& e)
    {
        writeMessage(message, messageLength, e.what());
    }
    catch (...)
    {
        writeMessage(message, messageLength, "unknown exception");
    }
    return 1;
}

// ------------------------------------------------------------------------------------------ parsing
inline std::string trim(std::string const& s)
{
    size_t const b = s.find_first_not_of(" \t\n");
    size_t const e = s.find_last_not_of(" \t\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

inline std::vector<std::string> split(std::string const& s, char separator)
{
    std::vector<std::string> parts;
    std::string part;
    std::istringstream in(s);
    while (std::getline(in, part, separator))
    {
        part = trim(part);
        if (!part.empty())
        {
            parts.push_back(part);
        }
    }
    return parts;
}

inline int64_t parseInteger(std::string const& text, char const* what)
{
    char* end = nullptr;
    errno = 0;
    long long const v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE)
    {
        fail("bad integer '", text, "' in ", what);
    }
    return v;
}

inline double parseNumber(std::string const& text, char const* what)
{
    char* end = nullptr;
    errno = 0;
    double const v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
    {
        fail("bad number '", text, "' in ", what);
    }
    return v;
}

inline DataType parseType(std::string const& name)
{
    if (name == "fp32" || name == "float32") return DataType::kFLOAT;
    if (name == "fp16" || name == "float16") return DataType::kHALF;
    if (name == "bf16" || name == "bfloat16") return DataType::kBF16;
    if (name == "int8") return DataType::kINT8;
    if (name == "int32") return DataType::kINT32;
    fail("unknown type '", name, "' (fp32, fp16, bf16, int8 or int32)");
}

//! "fp32:256,64,112,112;fp32:..." -> tensor specs.
inline std::vector<TensorSpec> parseIo(std::string const& spec)
{
    std::vector<TensorSpec> tensors;
    for (auto const& item : split(spec, ';'))
    {
        size_t const colon = item.find(':');
        if (colon == std::string::npos) fail("io '", item, "' is not type:d0,d1,...");
        std::vector<int64_t> dims;
        for (auto const& d : split(item.substr(colon + 1), ','))
        {
            int64_t const v = parseInteger(d, "io dimensions");
            if (v < 1) fail("io dimension ", v, " in '", item, "' must be >= 1");
            dims.push_back(v);
        }
        if (dims.empty() || dims.size() > static_cast<size_t>(Dims::MAX_DIMS))
            fail("io '", item, "' has rank ", dims.size());
        tensors.push_back({parseType(trim(item.substr(0, colon))), harness::makeDims(dims)});
    }
    if (tensors.empty()) fail("io spec '", spec, "' names no input");
    return tensors;
}

inline harness::FieldSet parseFields(std::string const& spec)
{
    harness::FieldSet fields;
    for (auto const& item : split(spec, ';'))
    {
        size_t const eq = item.find('=');
        size_t const colon = item.find(':', eq == std::string::npos ? 0 : eq);
        if (eq == std::string::npos || colon == std::string::npos)
            fail("field '", item, "' is not name=kind:payload");
        std::string const name = trim(item.substr(0, eq));
        std::string const kind = trim(item.substr(eq + 1, colon - eq - 1));
        std::string const payload = item.substr(colon + 1);
        if (name.empty()) fail("field '", item, "' has no name");
        if (kind == "i")
        {
            std::vector<int32_t> values;
            for (auto const& v : split(payload, ','))
            {
                int64_t const x = parseInteger(v, "an int field");
                if (x < INT32_MIN || x > INT32_MAX)
                    fail("int field '", name, "' value ", x, " does not fit int32");
                values.push_back(static_cast<int32_t>(x));
            }
            if (values.empty()) fail("int field '", name, "' has no values");
            fields.addInts(name, values);
        }
        else if (kind == "f")
        {
            std::vector<float> values;
            for (auto const& v : split(payload, ','))
                values.push_back(static_cast<float>(parseNumber(v, "a float field")));
            if (values.empty()) fail("float field '", name, "' has no values");
            fields.addFloats(name, values);
        }
        else if (kind == "s")
        {
            fields.addString(name, payload);
        }
        else if (kind == "rand")
        {
            std::vector<std::string> const args = split(payload, ',');
            if (args.size() != 4) fail("rand field '", name, "' needs count,seed,lo,hi");
            int64_t const count = parseInteger(args[0], "rand count");
            int64_t const seed = parseInteger(args[1], "rand seed");
            double const lo = parseNumber(args[2], "rand lo");
            double const hi = parseNumber(args[3], "rand hi");
            if (count < 1 || count > (int64_t{1} << 28) || !(lo < hi))
                fail("rand field '", name, "': bad count or range");
            std::mt19937 rng(static_cast<uint32_t>(seed));
            std::uniform_real_distribution<float> dist(static_cast<float>(lo), static_cast<float>(hi));
            std::vector<float> values(static_cast<size_t>(count));
            for (auto& v : values) v = dist(rng);
            fields.addFloats(name, values);
        }
        else
        {
            fail("field '", name, "' has unknown kind '", kind, "' (i, f, s or rand)");
        }
    }
    return fields;
}

struct Options
{
    double spinUs{50.0};
    double maxSeconds{3.0};
    double rotateBytes{0.0};  // 0: 2 x L2 + 1
    int64_t maxSets{65536};
    // tpk_bench_copy's copy: "memcpy" (cudaMemcpyAsync), "vector:B:U" (launchVectorCopy, B blocks an SM, 0:
    // a block a tile; U loads a thread) or "bulk:S:K" (launchBulkCopy, S stages of K KiB).
    std::string copyKernel{"memcpy"};
};

inline Options parseOptions(char const* spec)
{
    Options o;
    for (auto const& item : split(spec ? spec : "", ';'))
    {
        size_t const eq = item.find('=');
        if (eq == std::string::npos) fail("option '", item, "' is not key=value");
        std::string const key = trim(item.substr(0, eq));
        std::string const value = trim(item.substr(eq + 1));
        if (key == "spin_us")
            o.spinUs = parseNumber(value, "spin_us");
        else if (key == "max_seconds")
            o.maxSeconds = parseNumber(value, "max_seconds");
        else if (key == "rotate_bytes")
            o.rotateBytes = parseNumber(value, "rotate_bytes");
        else if (key == "max_sets")
            o.maxSets = parseInteger(value, "max_sets");
        else if (key == "copy_kernel")
            o.copyKernel = value;
        else
            fail("unknown option '", key, "' (spin_us, max_seconds, rotate_bytes, max_sets, copy_kernel)");
    }
    if (o.spinUs < 0 || o.maxSeconds <= 0 || o.rotateBytes < 0 || o.maxSets < 1) fail("option out of range");
    return o;
}

inline std::string describe(std::vector<TensorSpec> const& tensors)
{
    std::string out;
    for (auto const& t : tensors)
    {
        out += (out.empty() ? "" : ";") + std::string(harness::typeName(t.type)) + ":";
        for (int32_t d = 0; d < t.dims.nbDims; ++d) out += (d ? "," : "") + std::to_string(t.dims.d[d]);
    }
    return out;
}

inline size_t bytesOf(TensorSpec const& t)
{
    return static_cast<size_t>(harness::volumeOf(t.dims)) * harness::sizeOf(t.type);
}

inline size_t roundUp(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

// ---------------------------------------------------------------------------- TensorRT's sequence
using harness::Capabilities;
using harness::PluginPtr;
using harness::runtimeDescs;

//! The capability interfaces (shared helper of the harness), or a BenchError.
inline Capabilities capabilitiesOf(IPluginV3* plugin)
{
    std::string problem;
    char const* name = "";
    if (plugin != nullptr)
    {
        auto* core =
            static_cast<IPluginV3OneCore*>(plugin->getCapabilityInterface(PluginCapabilityType::kCORE));
        name = core != nullptr ? core->getPluginName() : "";
    }
    Capabilities const caps = harness::capabilitiesOf(plugin, name, problem);
    if (!problem.empty()) fail(problem);
    return caps;
}

//! The build phase and the engine's serialize round trip; the plugin it returns is the kRUNTIME one.
struct Planned
{
    std::vector<TensorSpec> inputs;
    std::vector<TensorSpec> outputs;
    size_t workspaceBytes{0};
    std::unique_ptr<harness::FieldSet> fields;
    std::unique_ptr<harness::SerializedFields> serialized;
    PluginPtr runtimePlugin;
};

inline Planned plan(std::string const& pluginName, std::string const& fieldsSpec, std::string const& ioSpec)
{
    logger().take();
    Planned p;
    IPluginCreatorV3One* creator = harness::asV3Creator(
        harness::HarnessRegistry::instance().getCreator(pluginName.c_str(), "1", "trt_plugin_kit"));
    if (creator == nullptr)
        fail("no creator trt_plugin_kit::", pluginName, " v1 registered (tpk_bench_load first)");
    p.inputs = parseIo(ioSpec);
    p.fields = std::make_unique<harness::FieldSet>(parseFields(fieldsSpec));

    PluginPtr build(creator->createPlugin("bench", p.fields->collection(), TensorRTPhase::kBUILD));
    if (!build) fail("createPlugin(kBUILD) rejected the fields: ", errorsLogged());
    Capabilities caps = capabilitiesOf(build.get());
    int32_t const nbIn = static_cast<int32_t>(p.inputs.size());
    int32_t const nbOut = caps.build->getNbOutputs();
    if (nbOut < 1 || nbOut > 8) fail("getNbOutputs returned ", nbOut);

    std::vector<DataType> inTypes, outTypes(static_cast<size_t>(nbOut));
    for (auto const& s : p.inputs) inTypes.push_back(s.type);
    if (caps.build->getOutputDataTypes(outTypes.data(), nbOut, inTypes.data(), nbIn) != 0)
        fail("getOutputDataTypes failed: ", errorsLogged());

    harness::HarnessExprBuilder builder;
    std::vector<DimsExprs> in(p.inputs.size()), out(static_cast<size_t>(nbOut));
    for (int32_t i = 0; i < nbIn; ++i)
    {
        in[i].nbDims = p.inputs[i].dims.nbDims;
        for (int32_t d = 0; d < in[i].nbDims; ++d) in[i].d[d] = builder.constant(p.inputs[i].dims.d[d]);
    }
    if (caps.build->getOutputShapes(in.data(), nbIn, nullptr, 0, out.data(), nbOut, builder) != 0)
        fail("getOutputShapes failed: ", errorsLogged());
    for (int32_t o = 0; o < nbOut; ++o)
    {
        Dims dims{};
        dims.nbDims = out[o].nbDims;
        if (dims.nbDims < 0 || dims.nbDims > Dims::MAX_DIMS)
            fail("getOutputShapes: output ", o, " has rank ", dims.nbDims);
        for (int32_t d = 0; d < dims.nbDims; ++d)
        {
            if (out[o].d[d] == nullptr || !out[o].d[d]->isConstant())
                fail("getOutputShapes: output ", o, " dim ", d, " is not constant for constant inputs");
            dims.d[d] = out[o].d[d]->getConstantValue();
        }
        p.outputs.push_back({outTypes[o], dims});
    }

    std::vector<TensorSpec> all(p.inputs);
    all.insert(all.end(), p.outputs.begin(), p.outputs.end());
    auto descs = harness::dynamicDescs(all, true);
    for (int32_t pos = 0; pos < nbIn + nbOut; ++pos)
    {
        if (!caps.build->supportsFormatCombination(pos, descs.data(), nbIn, nbOut))
            fail("supportsFormatCombination rejects ", harness::typeName(all[pos].type),
                 " linear at position ", pos);
    }
    auto inDyn = harness::dynamicDescs(p.inputs, true);
    auto outDyn = harness::dynamicDescs(p.outputs, true);
    if (caps.build->configurePlugin(inDyn.data(), nbIn, outDyn.data(), nbOut) != 0)
        fail("configurePlugin failed: ", errorsLogged());
    for (size_t i = 0; i < inDyn.size(); ++i) inDyn[i].desc.dims = p.inputs[i].dims;
    for (size_t i = 0; i < outDyn.size(); ++i) outDyn[i].desc.dims = p.outputs[i].dims;
    p.workspaceBytes = caps.build->getWorkspaceSize(inDyn.data(), nbIn, outDyn.data(), nbOut);

    // The engine stores getFieldsToSerialize; deserialization creates the plugin again in kRUNTIME.
    p.serialized = std::make_unique<harness::SerializedFields>(caps.runtime->getFieldsToSerialize());
    p.runtimePlugin.reset(
        creator->createPlugin("bench", p.serialized->collection(), TensorRTPhase::kRUNTIME));
    if (!p.runtimePlugin) fail("createPlugin(kRUNTIME) from the serialized fields failed: ", errorsLogged());
    capabilitiesOf(p.runtimePlugin.get());
    return p;
}

//! The runtime half of TensorRT's sequence for a planned plugin, as an engine's execution context does it:
//! attachToContext (the attached clone replaces the deserialized plugin), then onShapeChange with the planned
//! tensors. `Instance` holds planned, context, attached, runtime, inDescs and outDescs (a chain node, a
//! plugin op); `what` names it in a failure.
template <typename Instance>
void attachForRuntime(Instance& instance, std::string const& what)
{
    instance.attached.reset(
        capabilitiesOf(instance.planned.runtimePlugin.get()).runtime->attachToContext(&instance.context));
    if (!instance.attached) fail("attachToContext of ", what, " returned null: ", errorsLogged());
    instance.planned.runtimePlugin.reset();
    instance.runtime = capabilitiesOf(instance.attached.get()).runtime;
    instance.inDescs = runtimeDescs(instance.planned.inputs);
    instance.outDescs = runtimeDescs(instance.planned.outputs);
    if (instance.runtime->onShapeChange(
            instance.inDescs.data(), static_cast<int32_t>(instance.inDescs.size()), instance.outDescs.data(),
            static_cast<int32_t>(instance.outDescs.size())) != 0)
        fail("onShapeChange of ", what, " failed: ", errorsLogged());
}

// --------------------------------------------------------------------------------- GPU resources
struct DeviceMemory
{
    void* ptr{nullptr};
    explicit DeviceMemory(size_t bytes)
    {
        if (bytes > 0) cudaOk(cudaMalloc(&ptr, bytes), "cudaMalloc");
    }
    ~DeviceMemory()
    {
        if (ptr) cudaFree(ptr);
    }
    DeviceMemory(DeviceMemory const&) = delete;
    DeviceMemory& operator=(DeviceMemory const&) = delete;
};

struct Stream
{
    cudaStream_t stream{nullptr};
    Stream() { cudaOk(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); }
    ~Stream()
    {
        if (stream)
        {
            cudaStreamSynchronize(stream);
            cudaStreamDestroy(stream);
        }
    }
};

struct Events
{
    std::vector<cudaEvent_t> start, stop;
    explicit Events(size_t n) : start(n, nullptr), stop(n, nullptr)
    {
        for (size_t i = 0; i < n; ++i)
        {
            cudaOk(cudaEventCreate(&start[i]), "cudaEventCreate");
            cudaOk(cudaEventCreate(&stop[i]), "cudaEventCreate");
        }
    }
    ~Events()
    {
        for (size_t i = 0; i < start.size(); ++i)
        {
            if (start[i]) cudaEventDestroy(start[i]);
            if (stop[i]) cudaEventDestroy(stop[i]);
        }
    }
    //! Elapsed microseconds of pair i (after the stream has been synchronized).
    double us(size_t i) const
    {
        float ms = 0.F;
        cudaOk(cudaEventElapsedTime(&ms, start[i], stop[i]), "cudaEventElapsedTime");
        return 1000.0 * static_cast<double>(ms);
    }
};

struct Graphs
{
    std::vector<cudaGraphExec_t> execs;
    ~Graphs()
    {
        for (auto e : execs) cudaGraphExecDestroy(e);
    }
};

inline double percentile(std::vector<double> const& sorted, double q)
{
    double const pos = q * static_cast<double>(sorted.size() - 1);
    size_t const lo = static_cast<size_t>(std::floor(pos));
    size_t const hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

inline void putStats(std::vector<double> samples, double* results)
{
    std::sort(samples.begin(), samples.end());
    double sum = 0;
    for (double s : samples) sum += s;
    results[kMedianUs] = percentile(samples, 0.5);
    results[kP10Us] = percentile(samples, 0.1);
    results[kP90Us] = percentile(samples, 0.9);
    results[kMinUs] = samples.front();
    results[kMaxUs] = samples.back();
    results[kMeanUs] = sum / static_cast<double>(samples.size());
    results[kSamples] = static_cast<double>(samples.size());
}

//! Repetitions: as asked, fewer when they would take longer than `maxSeconds`, never fewer than 100.
inline int64_t timeBoxed(int64_t repetitions, double estimateUs, double spinUs, double maxSeconds)
{
    double const perRep = std::max(estimateUs + spinUs, 1.0);
    int64_t const fit = static_cast<int64_t>(maxSeconds * 1e6 / perRep);
    return std::max<int64_t>(std::min(repetitions, fit), std::min<int64_t>(repetitions, 100));
}

inline int deviceL2Bytes()
{
    int device = 0;
    cudaOk(cudaGetDevice(&device), "cudaGetDevice");
    int l2 = 0;
    cudaOk(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 cache size");
    return l2;
}

//! Checks the first and last bytes of a float output for the NaN poison (an output the kernel never wrote).
inline void checkWritten(TensorSpec const& spec, void const* data, int index)
{
    if (spec.type != DataType::kFLOAT && spec.type != DataType::kHALF && spec.type != DataType::kBF16)
        return;  // 0xFF.. is a valid integer
    size_t const bytes = bytesOf(spec);
    size_t const chunk = std::min<size_t>(bytes, 4096);
    std::vector<uint8_t> host(chunk);
    for (size_t offset : {size_t{0}, bytes - chunk})
    {
        cudaOk(
            cudaMemcpy(host.data(), static_cast<char const*>(data) + offset, chunk, cudaMemcpyDeviceToHost),
            "read output");
        harness::HostTensor view(
            spec.type, harness::makeDims({static_cast<int64_t>(chunk / harness::sizeOf(spec.type))}));
        view.bytes = host;
        for (int64_t i = 0; i < view.count(); ++i)
        {
            if (std::isnan(view.get(i)))
                fail("output ", index, " was not written (NaN poison at byte ",
                     offset + i * harness::sizeOf(spec.type), ")");
        }
    }
}

}  // namespace tpk_bench
