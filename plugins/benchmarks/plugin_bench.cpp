// libplugin_bench.so: times the enqueue of every plugin of libtrt_plugin_kit.so on the GPU, driven through
// TensorRT's call sequence by the conformance harness's fakes (registry, expression builder, resource
// context), for trt_plugin_kit/benchmarks (ctypes, library.py).
//
// The library exports `getPluginRegistry` (from harness/trt_fakes.cpp). Loaded with RTLD_GLOBAL before the
// plugin library, it is the registry the plugin library's static initializer registers with; otherwise
// tpk_bench_load registers the creators through getCreators, as IPluginRegistry::loadLibrary does.
//
// C API (every call returns 0 on success, else non-zero with the reason in `message`):
//   tpk_bench_load(plugin_library, message, message_len)
//   tpk_bench_device(message, message_len)                       -> JSON of the device in `message`
//   tpk_bench_plan(plugin, fields, io, results, n, message, len) -> build phase only, no GPU needed
//   tpk_bench_run(plugin, fields, io, repetitions, graph_batch, options, results, n, message, len)
//   tpk_bench_copy(bytes, repetitions, options, results, n, message, len)
//   tpk_bench_chain(spec, repetitions, options, message, len)   -> JSON of the timings in `message`
// `fields`: "name=kind:payload;..." with kind i (ints "1,2"), f (floats), s (string) or rand
//   ("count,seed,lo,hi": `count` uniform floats from std::mt19937(seed)), e.g.
//   "mode=s:max;kernel=i:2,2" or "weights=rand:400000,7,-0.05,0.05;num_outputs=i:500".
// `io`: one "type:d0,d1,..." per input, separated by ';' (types fp32, fp16, bf16, int8, int32).
// `options`: "key=value;..." with spin_us (default 50), max_seconds (default 3), rotate_bytes (default
//   2 x L2 + 1), max_sets (default 65536).
// On success `message` holds the outputs as "type:dims;...". `results` (see Result below) gets the timing in
// microseconds per enqueue and the sizes of the run.
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

namespace
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
    kRotationBytes,  // inputs of all rotating sets together
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

void cudaOk(cudaError_t status, char const* what)
{
    if (status != cudaSuccess)
    {
        cudaGetLastError();  // Clears a non-sticky error so that the next case can run.
        fail(what, ": ", cudaGetErrorString(status));
    }
}

harness::RecordingLogger& logger()
{
    static harness::RecordingLogger* instance = new harness::RecordingLogger();
    return *instance;
}

std::string errorsLogged()
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

void writeMessage(char* message, int length, std::string const& text)
{
    if (message != nullptr && length > 0)
    {
        std::snprintf(message, static_cast<size_t>(length), "%s", text.c_str());
    }
}

// ------------------------------------------------------------------------------------------ parsing
std::string trim(std::string const& s)
{
    size_t const b = s.find_first_not_of(" \t\n");
    size_t const e = s.find_last_not_of(" \t\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::vector<std::string> split(std::string const& s, char separator)
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

int64_t parseInteger(std::string const& text, char const* what)
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

double parseNumber(std::string const& text, char const* what)
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

DataType parseType(std::string const& name)
{
    if (name == "fp32" || name == "float32") return DataType::kFLOAT;
    if (name == "fp16" || name == "float16") return DataType::kHALF;
    if (name == "bf16" || name == "bfloat16") return DataType::kBF16;
    if (name == "int8") return DataType::kINT8;
    if (name == "int32") return DataType::kINT32;
    fail("unknown type '", name, "' (fp32, fp16, bf16, int8 or int32)");
}

//! "fp32:256,64,112,112;fp32:..." -> tensor specs.
std::vector<TensorSpec> parseIo(std::string const& spec)
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

harness::FieldSet parseFields(std::string const& spec)
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
};

Options parseOptions(char const* spec)
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
        else
            fail("unknown option '", key, "' (spin_us, max_seconds, rotate_bytes, max_sets)");
    }
    if (o.spinUs < 0 || o.maxSeconds <= 0 || o.rotateBytes < 0 || o.maxSets < 1) fail("option out of range");
    return o;
}

std::string describe(std::vector<TensorSpec> const& tensors)
{
    std::string out;
    for (auto const& t : tensors)
    {
        out += (out.empty() ? "" : ";") + std::string(harness::typeName(t.type)) + ":";
        for (int32_t d = 0; d < t.dims.nbDims; ++d) out += (d ? "," : "") + std::to_string(t.dims.d[d]);
    }
    return out;
}

size_t bytesOf(TensorSpec const& t)
{
    return static_cast<size_t>(harness::volumeOf(t.dims)) * harness::sizeOf(t.type);
}

size_t roundUp(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

// ---------------------------------------------------------------------------- TensorRT's sequence
using harness::Capabilities;
using harness::PluginPtr;
using harness::runtimeDescs;

//! The capability interfaces (shared helper of the harness), or a BenchError.
Capabilities capabilitiesOf(IPluginV3* plugin)
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

Planned plan(std::string const& pluginName, std::string const& fieldsSpec, std::string const& ioSpec)
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

double percentile(std::vector<double> const& sorted, double q)
{
    double const pos = q * static_cast<double>(sorted.size() - 1);
    size_t const lo = static_cast<size_t>(std::floor(pos));
    size_t const hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

void putStats(std::vector<double> samples, double* results)
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
int64_t timeBoxed(int64_t repetitions, double estimateUs, double spinUs, double maxSeconds)
{
    double const perRep = std::max(estimateUs + spinUs, 1.0);
    int64_t const fit = static_cast<int64_t>(maxSeconds * 1e6 / perRep);
    return std::max<int64_t>(std::min(repetitions, fit), std::min<int64_t>(repetitions, 100));
}

int deviceL2Bytes()
{
    int device = 0;
    cudaOk(cudaGetDevice(&device), "cudaGetDevice");
    int l2 = 0;
    cudaOk(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 cache size");
    return l2;
}

//! Checks the first and last bytes of a float output for the NaN poison (an output the kernel never wrote).
void checkWritten(TensorSpec const& spec, void const* data, int index)
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

//! Tactics, chosen as TensorRT's builder does: time each one, keep the fastest (and set it). Timed the way
//! the case is measured: small enqueues inside a CUDA graph when `inGraph`, so that launch overhead does not
//! pick the tactic (eager timing chose a slower one for FC at batch 1); otherwise one enqueue after the GPU
//! wait kernel, the median of 15 (back-to-back enqueues overlap one another). Returns the tactic, 0 when the
//! plugin has none.
int32_t chooseTactic(std::string const& pluginName, IPluginV3* plugin,
                     std::function<void(int64_t)> const& enqueue, int64_t sets, bool inGraph, uint64_t spinNs,
                     cudaStream_t stream)
{
    Capabilities const caps = capabilitiesOf(plugin);
    int32_t const nbTactics = caps.build->getNbTactics();
    if (nbTactics <= 0) return 0;
    std::vector<int32_t> tactics(static_cast<size_t>(nbTactics));
    if (caps.build->getValidTactics(tactics.data(), nbTactics) != 0)
        fail("getValidTactics failed: ", errorsLogged());
    double bestUs = INFINITY;
    int32_t best = 0;
    std::string timings;
    for (int32_t tactic : tactics)
    {
        if (caps.runtime->setTactic(tactic) != 0) fail("setTactic(", tactic, ") failed: ", errorsLogged());
        for (int64_t r = 0; r < 3; ++r) enqueue(r % sets);
        constexpr int64_t kTacticReps = 20;
        cudaGraphExec_t exec = nullptr;
        if (inGraph)
        {
            cudaGraph_t graph = nullptr;
            cudaOk(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
            for (int64_t r = 0; r < kTacticReps; ++r) enqueue(r % sets);
            cudaOk(cudaStreamEndCapture(stream, &graph), "end capture");
            cudaError_t const made = cudaGraphInstantiate(&exec, graph, 0);
            cudaGraphDestroy(graph);
            cudaOk(made, "cudaGraphInstantiate");
            cudaOk(cudaGraphLaunch(exec, stream), "graph launch");
        }
        double us = INFINITY;
        if (exec != nullptr)
        {
            for (int trial = 0; trial < 5;
                 ++trial)  // best of five: the fastest tactics differ by a few percent
            {
                Events timing(1);
                cudaOk(cudaEventRecord(timing.start[0], stream), "record");
                cudaOk(cudaGraphLaunch(exec, stream), "graph launch");
                cudaOk(cudaEventRecord(timing.stop[0], stream), "record");
                cudaOk(cudaStreamSynchronize(stream), "tactic timing");
                us = std::min(us, timing.us(0) / static_cast<double>(kTacticReps));
            }
            cudaGraphExecDestroy(exec);
        }
        else
        {
            constexpr int64_t kEagerReps = 15;
            Events timing(kEagerReps);
            for (int64_t r = 0; r < kEagerReps; ++r)
            {
                if (spinNs) cudaOk(bench::launchSpin(spinNs, stream), "spin");
                cudaOk(cudaEventRecord(timing.start[r], stream), "record");
                enqueue((r + 1) % sets);
                cudaOk(cudaEventRecord(timing.stop[r], stream), "record");
            }
            cudaOk(cudaStreamSynchronize(stream), "tactic timing");
            std::vector<double> samples;
            for (int64_t r = 0; r < kEagerReps; ++r) samples.push_back(timing.us(static_cast<size_t>(r)));
            std::sort(samples.begin(), samples.end());
            us = samples[samples.size() / 2];
        }
        timings += " " + std::to_string(tactic) + ":" + std::to_string(us).substr(0, 7);
        if (us < bestUs)
        {
            bestUs = us;
            best = tactic;
        }
    }
    if (caps.runtime->setTactic(best) != 0) fail("setTactic(", best, ") failed: ", errorsLogged());
    std::printf("  %s: tactics (us per enqueue)%s -> tactic %d\n", pluginName.c_str(), timings.c_str(), best);
    std::fflush(stdout);
    return best;
}

void run(std::string const& pluginName, std::string const& fieldsSpec, std::string const& ioSpec,
         int64_t repetitions, int64_t graphBatch, Options const& options, double* results,
         std::string& outputs)
{
    if (repetitions < 1) fail("repetitions must be >= 1");
    if (graphBatch < 0) fail("graph_batch must be >= 0");
    Planned p = plan(pluginName, fieldsSpec, ioSpec);
    outputs = describe(p.outputs);

    // ---- runtime: attach a clone to an execution context, then the concrete shapes
    harness::HarnessResourceContext context;
    PluginPtr attached(capabilitiesOf(p.runtimePlugin.get()).runtime->attachToContext(&context));
    if (!attached) fail("attachToContext returned null: ", errorsLogged());
    p.runtimePlugin.reset();
    IPluginV3OneRuntime* runtime = capabilitiesOf(attached.get()).runtime;
    auto inDescs = runtimeDescs(p.inputs);
    auto outDescs = runtimeDescs(p.outputs);
    int32_t const nbIn = static_cast<int32_t>(p.inputs.size());
    int32_t const nbOut = static_cast<int32_t>(p.outputs.size());
    if (runtime->onShapeChange(inDescs.data(), nbIn, outDescs.data(), nbOut) != 0)
        fail("onShapeChange failed: ", errorsLogged());

    // ---- rotating sets of inputs and outputs, together larger than twice the L2 cache
    int const l2 = deviceL2Bytes();
    size_t inSet = 0, outSet = 0, inPitchSum = 0, outPitchSum = 0;
    std::vector<size_t> inPitch, outPitch;
    for (auto const& t : p.inputs)
    {
        inSet += bytesOf(t);
        inPitch.push_back(roundUp(std::max<size_t>(bytesOf(t), 1), kPitchAlignment));
        inPitchSum += inPitch.back();
    }
    for (auto const& t : p.outputs)
    {
        outSet += bytesOf(t);
        outPitch.push_back(roundUp(std::max<size_t>(bytesOf(t), 1), kPitchAlignment));
        outPitchSum += outPitch.back();
    }
    double const rotate = options.rotateBytes > 0 ? options.rotateBytes : 2.0 * l2 + 1;
    int64_t sets = static_cast<int64_t>(std::ceil(rotate / static_cast<double>(std::max<size_t>(inSet, 1))));
    sets = std::max<int64_t>(2, std::min<int64_t>(sets, options.maxSets));
    size_t freeBytes = 0, totalBytes = 0;
    cudaOk(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
    double const need = static_cast<double>(sets) * static_cast<double>(inPitchSum + outPitchSum) +
                        static_cast<double>(p.workspaceBytes);
    if (need > 0.85 * static_cast<double>(freeBytes))
        fail("needs ", need / (1 << 20), " MiB of GPU memory for ", sets, " rotating sets, ",
             freeBytes / (1 << 20), " MiB free");

    Stream stream;
    std::vector<std::unique_ptr<DeviceMemory>> inSlabs, outSlabs;
    for (int32_t i = 0; i < nbIn; ++i)
    {
        size_t const slab = static_cast<size_t>(sets) * inPitch[i];
        inSlabs.push_back(std::make_unique<DeviceMemory>(slab));
        cudaOk(bench::fillNonZero(p.inputs[i].type, inSlabs.back()->ptr,
                                  slab / harness::sizeOf(p.inputs[i].type),
                                  1000003ULL * static_cast<uint64_t>(i + 1), stream.stream),
               "fill inputs");
    }
    for (int32_t o = 0; o < nbOut; ++o)
    {
        size_t const slab = static_cast<size_t>(sets) * outPitch[o];
        outSlabs.push_back(std::make_unique<DeviceMemory>(slab));
        cudaOk(cudaMemsetAsync(outSlabs.back()->ptr, 0xFF, slab, stream.stream), "poison outputs");  // NaN
    }
    DeviceMemory workspace(p.workspaceBytes);
    cudaOk(cudaStreamSynchronize(stream.stream), "fill");

    std::vector<void const*> inPtrs(static_cast<size_t>(sets * nbIn));
    std::vector<void*> outPtrs(static_cast<size_t>(sets * nbOut));
    for (int64_t s = 0; s < sets; ++s)
    {
        for (int32_t i = 0; i < nbIn; ++i)
            inPtrs[s * nbIn + i] = static_cast<char*>(inSlabs[i]->ptr) + s * inPitch[i];
        for (int32_t o = 0; o < nbOut; ++o)
            outPtrs[s * nbOut + o] = static_cast<char*>(outSlabs[o]->ptr) + s * outPitch[o];
    }
    auto enqueue = [&](int64_t set)
    {
        int32_t const status = runtime->enqueue(inDescs.data(), outDescs.data(), &inPtrs[set * nbIn],
                                                &outPtrs[set * nbOut], workspace.ptr, stream.stream);
        if (status != 0) fail("enqueue returned ", status, ": ", errorsLogged());
    };

    // ---- one checked enqueue: it ran, and wrote its outputs
    enqueue(0);
    cudaOk(cudaStreamSynchronize(stream.stream), "first enqueue");
    for (int32_t o = 0; o < nbOut; ++o) checkWritten(p.outputs[o], outPtrs[o], o);

    // ---- tactics, chosen as TensorRT's builder does: time each one, keep the fastest
    chooseTactic(pluginName, attached.get(), enqueue, sets, graphBatch > 0,
                 static_cast<uint64_t>(options.spinUs * 1000.0), stream.stream);

    uint64_t const spinNs = static_cast<uint64_t>(options.spinUs * 1000.0);
    std::vector<double> samples;
    // `warm` launches, which also estimate the time per launch, then as many timed ones as the time box
    // allows: [spin] start-event launch stop-event, each sample divided by the enqueues one launch makes.
    // launch(i) is called with i = 0, 1, 2, ... throughout, so the rotation over the sets never restarts.
    auto timeLaunches = [&](auto&& launch, int64_t warm, int64_t enqueuesPerLaunch, char const* what)
    {
        Events probe(1);
        cudaOk(cudaEventRecord(probe.start[0], stream.stream), "record");
        for (int64_t r = 0; r < warm; ++r) launch(r);
        cudaOk(cudaEventRecord(probe.stop[0], stream.stream), "record");
        cudaOk(cudaStreamSynchronize(stream.stream), what);
        double const estimate = probe.us(0) / static_cast<double>(warm);
        int64_t const reps = timeBoxed(repetitions, estimate, options.spinUs, options.maxSeconds);

        Events events(static_cast<size_t>(reps));
        for (int64_t r = 0; r < reps; ++r)
        {
            if (spinNs) cudaOk(bench::launchSpin(spinNs, stream.stream), "spin");
            cudaOk(cudaEventRecord(events.start[r], stream.stream), "record");
            launch(warm + r);
            cudaOk(cudaEventRecord(events.stop[r], stream.stream), "record");
        }
        cudaOk(cudaStreamSynchronize(stream.stream), what);
        for (int64_t r = 0; r < reps; ++r)
            samples.push_back(events.us(static_cast<size_t>(r)) / static_cast<double>(enqueuesPerLaunch));
    };
    if (graphBatch == 0)
    {
        // ---- eager: one enqueue a launch, rotating the sets (at least 5 warm-up enqueues)
        int64_t const warm = std::max<int64_t>(5, std::min<int64_t>(sets, 200));
        timeLaunches([&](int64_t r) { enqueue(r % sets); }, warm, 1, "timed enqueues");
        results[kGraphs] = 0;
    }
    else
    {
        // ---- graphs of `graphBatch` enqueues each, together covering every set once
        int64_t const count = (sets + graphBatch - 1) / graphBatch;
        Graphs graphs;
        for (int64_t g = 0; g < count; ++g)
        {
            cudaGraph_t graph = nullptr;
            cudaOk(cudaStreamBeginCapture(stream.stream, cudaStreamCaptureModeGlobal), "begin capture");
            int32_t status = 0;
            for (int64_t i = 0; i < graphBatch && status == 0; ++i)
            {
                int64_t const set = (g * graphBatch + i) % sets;
                status = runtime->enqueue(inDescs.data(), outDescs.data(), &inPtrs[set * nbIn],
                                          &outPtrs[set * nbOut], workspace.ptr, stream.stream);
            }
            cudaError_t const end = cudaStreamEndCapture(stream.stream, &graph);
            if (status != 0 || end != cudaSuccess)
            {
                if (graph) cudaGraphDestroy(graph);
                cudaGetLastError();
                fail("enqueue is not capturable in a CUDA graph (enqueue ", status, ", ",
                     cudaGetErrorString(end), "): ", errorsLogged());
            }
            cudaGraphExec_t exec = nullptr;
            cudaError_t const made = cudaGraphInstantiate(&exec, graph, 0);
            cudaGraphDestroy(graph);
            cudaOk(made, "cudaGraphInstantiate");
            graphs.execs.push_back(exec);
        }
        auto replay = [&](int64_t r)
        { cudaOk(cudaGraphLaunch(graphs.execs[r % count], stream.stream), "graph launch"); };
        timeLaunches(replay, std::max<int64_t>(3, count), graphBatch, "timed graph replays");
        results[kGraphs] = static_cast<double>(count);
    }
    putStats(samples, results);
    results[kRotationSets] = static_cast<double>(sets);
    results[kInputBytes] = static_cast<double>(inSet);
    results[kOutputBytes] = static_cast<double>(outSet);
    results[kWorkspaceBytes] = static_cast<double>(p.workspaceBytes);
    results[kL2Bytes] = l2;
    results[kRotationBytes] = static_cast<double>(sets) * static_cast<double>(inSet);
}

// ------------------------------------------------------------------------------------------- chains
//! "a#b##c" -> {"a", "b", "", "c"} (split drops empty parts; a chain node's fields may be empty).
std::vector<std::string> splitAll(std::string const& s, char separator)
{
    std::vector<std::string> parts;
    size_t begin = 0;
    while (true)
    {
        size_t const end = s.find(separator, begin);
        parts.push_back(trim(s.substr(begin, end == std::string::npos ? std::string::npos : end - begin)));
        if (end == std::string::npos) return parts;
        begin = end + 1;
    }
}

bool sameTensor(TensorSpec const& a, TensorSpec const& b)
{
    if (a.type != b.type || a.dims.nbDims != b.dims.nbDims) return false;
    for (int32_t d = 0; d < a.dims.nbDims; ++d)
        if (a.dims.d[d] != b.dims.d[d]) return false;
    return true;
}

//! One plugin of a chain: attached to its own execution context, shaped, with outputs for every rotating set.
struct ChainNode
{
    std::string plugin;
    Planned planned;
    harness::HarnessResourceContext context;
    PluginPtr attached;
    IPluginV3OneRuntime* runtime{nullptr};
    std::vector<PluginTensorDesc> inDescs, outDescs;
    std::vector<std::pair<int, int>> sources;  // per input: (-1, external input) or (node, output)
    std::vector<size_t> outPitch;
    std::vector<std::unique_ptr<DeviceMemory>> outSlabs;
    std::unique_ptr<DeviceMemory> workspace;
    std::vector<void const*> inPtrs;  // [set][input]
    std::vector<void*> outPtrs;       // [set][output]
};

std::string statsJson(std::vector<double> const& samples)
{
    double stats[kResultCount];
    putStats(samples, stats);
    std::ostringstream out;
    out.precision(6);
    out << "{\"median_us\": " << stats[kMedianUs] << ", \"p10_us\": " << stats[kP10Us]
        << ", \"p90_us\": " << stats[kP90Us] << ", \"min_us\": " << stats[kMinUs]
        << ", \"max_us\": " << stats[kMaxUs] << ", \"mean_us\": " << stats[kMeanUs]
        << ", \"samples\": " << samples.size() << "}";
    return out.str();
}

//! Median-timed replays of `graphs` (one per rotating set) with the wait kernel before each: microseconds per
//! replay.
std::vector<double> timeGraphs(std::vector<cudaGraphExec_t> const& graphs, int64_t repetitions,
                               Options const& options, cudaStream_t stream)
{
    auto const count = static_cast<int64_t>(graphs.size());
    int64_t const warm = std::max<int64_t>(3, count);
    Events probe(1);
    cudaOk(cudaEventRecord(probe.start[0], stream), "record");
    for (int64_t r = 0; r < warm; ++r) cudaOk(cudaGraphLaunch(graphs[r % count], stream), "graph launch");
    cudaOk(cudaEventRecord(probe.stop[0], stream), "record");
    cudaOk(cudaStreamSynchronize(stream), "graph warm-up");
    double const estimate = probe.us(0) / static_cast<double>(warm);
    int64_t const reps = timeBoxed(repetitions, estimate, options.spinUs, options.maxSeconds);
    uint64_t const spinNs = static_cast<uint64_t>(options.spinUs * 1000.0);
    Events events(static_cast<size_t>(reps));
    for (int64_t r = 0; r < reps; ++r)
    {
        if (spinNs) cudaOk(bench::launchSpin(spinNs, stream), "spin");
        cudaOk(cudaEventRecord(events.start[r], stream), "record");
        cudaOk(cudaGraphLaunch(graphs[r % count], stream), "graph launch");
        cudaOk(cudaEventRecord(events.stop[r], stream), "record");
    }
    cudaOk(cudaStreamSynchronize(stream), "timed graph replays");
    std::vector<double> samples;
    for (int64_t r = 0; r < reps; ++r) samples.push_back(events.us(static_cast<size_t>(r)));
    return samples;
}

//! A chain of plugins (spec: nodes "plugin#fields#io#sources" separated by '|', sources one per input: "in"
//! for a new external input or "k.o" for output o of node k), one CUDA graph per forward, each forward on its
//! own rotating set of external inputs; and the launch-latency floor: a graph of as many empty-kernel nodes.
void chain(std::string const& spec, int64_t repetitions, Options const& options, std::string& json)
{
    if (repetitions < 1) fail("repetitions must be >= 1");
    std::vector<std::string> const nodeSpecs = split(spec, '|');
    if (nodeSpecs.empty()) fail("the chain names no node");
    std::vector<std::unique_ptr<ChainNode>> nodes;
    std::vector<TensorSpec> externals;
    for (size_t i = 0; i < nodeSpecs.size(); ++i)
    {
        std::vector<std::string> const parts = splitAll(nodeSpecs[i], '#');
        if (parts.size() != 4) fail("chain node '", nodeSpecs[i], "' is not plugin#fields#io#sources");
        auto node = std::make_unique<ChainNode>();
        node->plugin = parts[0];
        node->planned = plan(parts[0], parts[1], parts[2]);
        std::vector<std::string> const sources = split(parts[3], ',');
        if (sources.size() != node->planned.inputs.size())
            fail("chain node ", i, " (", parts[0], ") has ", node->planned.inputs.size(), " inputs but ",
                 sources.size(), " sources");
        for (size_t j = 0; j < sources.size(); ++j)
        {
            if (sources[j] == "in")
            {
                node->sources.emplace_back(-1, static_cast<int>(externals.size()));
                externals.push_back(node->planned.inputs[j]);
                continue;
            }
            size_t const dot = sources[j].find('.');
            if (dot == std::string::npos) fail("chain source '", sources[j], "' is not 'in' or node.output");
            int64_t const from = parseInteger(sources[j].substr(0, dot), "chain source");
            int64_t const output = parseInteger(sources[j].substr(dot + 1), "chain source");
            if (from < 0 || from >= static_cast<int64_t>(i) || output < 0 ||
                output >= static_cast<int64_t>(nodes[from]->planned.outputs.size()))
                fail("chain source '", sources[j], "' of node ", i, " is not an output of an earlier node");
            TensorSpec const& produced = nodes[from]->planned.outputs[output];
            if (!sameTensor(produced, node->planned.inputs[j]))
                fail("chain node ", i, " input ", j, " is ", describe({node->planned.inputs[j]}),
                     " but node ", from, " output ", output, " is ", describe({produced}));
            node->sources.emplace_back(static_cast<int>(from), static_cast<int>(output));
        }
        node->attached.reset(
            capabilitiesOf(node->planned.runtimePlugin.get()).runtime->attachToContext(&node->context));
        if (!node->attached) fail("attachToContext returned null: ", errorsLogged());
        node->planned.runtimePlugin.reset();
        node->runtime = capabilitiesOf(node->attached.get()).runtime;
        node->inDescs = runtimeDescs(node->planned.inputs);
        node->outDescs = runtimeDescs(node->planned.outputs);
        if (node->runtime->onShapeChange(node->inDescs.data(), static_cast<int32_t>(node->inDescs.size()),
                                         node->outDescs.data(),
                                         static_cast<int32_t>(node->outDescs.size())) != 0)
            fail("onShapeChange of chain node ", i, " (", parts[0], ") failed: ", errorsLogged());
        nodes.push_back(std::move(node));
    }
    if (externals.empty()) fail("the chain has no external input");

    // ---- rotating sets of the external inputs (as run(): together > 2x L2 unless max_sets caps them); every
    // set has its own intermediate and final outputs
    size_t inSet = 0, need = 0;
    std::vector<size_t> inPitch;
    for (auto const& t : externals)
    {
        inSet += bytesOf(t);
        inPitch.push_back(roundUp(std::max<size_t>(bytesOf(t), 1), kPitchAlignment));
        need += inPitch.back();
    }
    for (auto& node : nodes)
        for (auto const& t : node->planned.outputs)
        {
            node->outPitch.push_back(roundUp(std::max<size_t>(bytesOf(t), 1), kPitchAlignment));
            need += node->outPitch.back();
        }
    double const rotate = options.rotateBytes > 0 ? options.rotateBytes : 2.0 * deviceL2Bytes() + 1;
    int64_t sets = static_cast<int64_t>(std::ceil(rotate / static_cast<double>(std::max<size_t>(inSet, 1))));
    sets = std::max<int64_t>(2, std::min<int64_t>(sets, options.maxSets));
    size_t freeBytes = 0, totalBytes = 0;
    cudaOk(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
    double workspaceBytes = 0;
    for (auto const& node : nodes) workspaceBytes += static_cast<double>(node->planned.workspaceBytes);
    if (static_cast<double>(sets) * static_cast<double>(need) + workspaceBytes >
        0.85 * static_cast<double>(freeBytes))
        fail("the chain needs more GPU memory than is free for ", sets, " rotating sets");

    Stream stream;
    std::vector<std::unique_ptr<DeviceMemory>> inSlabs;
    for (size_t e = 0; e < externals.size(); ++e)
    {
        size_t const slab = static_cast<size_t>(sets) * inPitch[e];
        inSlabs.push_back(std::make_unique<DeviceMemory>(slab));
        cudaOk(bench::fillNonZero(externals[e].type, inSlabs.back()->ptr,
                                  slab / harness::sizeOf(externals[e].type), 7000003ULL * (e + 1),
                                  stream.stream),
               "fill chain inputs");
    }
    for (auto& node : nodes)
    {
        for (size_t o = 0; o < node->planned.outputs.size(); ++o)
        {
            size_t const slab = static_cast<size_t>(sets) * node->outPitch[o];
            node->outSlabs.push_back(std::make_unique<DeviceMemory>(slab));
            cudaOk(cudaMemsetAsync(node->outSlabs.back()->ptr, 0xFF, slab, stream.stream), "poison outputs");
        }
        node->workspace = std::make_unique<DeviceMemory>(node->planned.workspaceBytes);
    }
    for (auto& node : nodes)
    {
        for (int64_t s = 0; s < sets; ++s)
        {
            for (auto const& [from, index] : node->sources)
            {
                if (from < 0)
                    node->inPtrs.push_back(static_cast<char*>(inSlabs[index]->ptr) + s * inPitch[index]);
                else
                    node->inPtrs.push_back(static_cast<char*>(nodes[from]->outSlabs[index]->ptr) +
                                           s * nodes[from]->outPitch[index]);
            }
            for (size_t o = 0; o < node->outSlabs.size(); ++o)
                node->outPtrs.push_back(static_cast<char*>(node->outSlabs[o]->ptr) + s * node->outPitch[o]);
        }
    }
    cudaOk(cudaStreamSynchronize(stream.stream), "fill");

    auto enqueueNode = [&](ChainNode& node, int64_t set)
    {
        size_t const nbIn = node.inDescs.size(), nbOut = node.outDescs.size();
        int32_t const status =
            node.runtime->enqueue(node.inDescs.data(), node.outDescs.data(), &node.inPtrs[set * nbIn],
                                  &node.outPtrs[set * nbOut], node.workspace->ptr, stream.stream);
        if (status != 0) fail(node.plugin, " enqueue returned ", status, ": ", errorsLogged());
    };
    auto forward = [&](int64_t set)
    {
        for (auto& node : nodes) enqueueNode(*node, set);
    };

    // ---- every set computed once (the tactics are timed on real intermediates), outputs checked
    for (int64_t s = 0; s < sets; ++s) forward(s);
    cudaOk(cudaStreamSynchronize(stream.stream), "chain forward");
    for (auto& node : nodes)
        for (size_t o = 0; o < node->outPtrs.size() && o < node->planned.outputs.size(); ++o)
            checkWritten(node->planned.outputs[o], node->outPtrs[o], static_cast<int>(o));
    std::string tactics;
    for (auto& node : nodes)
    {
        ChainNode& current = *node;
        int32_t const tactic = chooseTactic(
            current.plugin, current.attached.get(), [&](int64_t set) { enqueueNode(current, set); }, sets,
            true, 0, stream.stream);
        tactics += (tactics.empty() ? "" : ", ") + std::to_string(tactic);
    }

    // ---- one graph per set, each one forward
    Graphs graphs;
    size_t nodesPerGraph = 0, kernelNodes = 0;
    for (int64_t s = 0; s < sets; ++s)
    {
        cudaGraph_t graph = nullptr;
        cudaOk(cudaStreamBeginCapture(stream.stream, cudaStreamCaptureModeGlobal), "begin capture");
        try
        {
            forward(s);
        }
        catch (...)
        {
            cudaStreamEndCapture(stream.stream, &graph);
            if (graph) cudaGraphDestroy(graph);
            throw;
        }
        cudaOk(cudaStreamEndCapture(stream.stream, &graph), "end capture (enqueue not capturable?)");
        if (s == 0)
        {
            cudaOk(cudaGraphGetNodes(graph, nullptr, &nodesPerGraph), "cudaGraphGetNodes");
            std::vector<cudaGraphNode_t> all(nodesPerGraph);
            cudaOk(cudaGraphGetNodes(graph, all.data(), &nodesPerGraph), "cudaGraphGetNodes");
            for (auto n : all)
            {
                cudaGraphNodeType type{};
                cudaOk(cudaGraphNodeGetType(n, &type), "cudaGraphNodeGetType");
                kernelNodes += type == cudaGraphNodeTypeKernel ? 1 : 0;
            }
        }
        cudaGraphExec_t exec = nullptr;
        cudaError_t const made = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        cudaOk(made, "cudaGraphInstantiate");
        graphs.execs.push_back(exec);
    }
    std::vector<double> const forwardUs = timeGraphs(graphs.execs, repetitions, options, stream.stream);

    // ---- the floor: one graph of as many empty-kernel nodes, timed the same way
    Graphs empty;
    {
        cudaGraph_t graph = nullptr;
        cudaOk(cudaStreamBeginCapture(stream.stream, cudaStreamCaptureModeGlobal), "begin capture");
        for (size_t i = 0; i < std::max<size_t>(nodesPerGraph, 1); ++i)
            cudaOk(bench::launchEmpty(stream.stream), "empty");
        cudaOk(cudaStreamEndCapture(stream.stream, &graph), "end capture");
        cudaGraphExec_t exec = nullptr;
        cudaError_t const made = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        cudaOk(made, "cudaGraphInstantiate");
        empty.execs.push_back(exec);
    }
    std::vector<double> const floorUs = timeGraphs(empty.execs, repetitions, options, stream.stream);

    std::ostringstream out;
    out << "{\"forward\": " << statsJson(forwardUs) << ", \"floor\": " << statsJson(floorUs)
        << ", \"graph_nodes\": " << nodesPerGraph << ", \"kernel_nodes\": " << kernelNodes
        << ", \"rotation_sets\": " << sets << ", \"input_bytes\": " << inSet << ", \"tactics\": [" << tactics
        << "]}";
    json = out.str();
}

void copy(double bytesDouble, int64_t repetitions, Options const& options, double* results)
{
    if (!(bytesDouble >= 1.0)) fail("copy bytes must be >= 1");
    if (repetitions < 1) fail("repetitions must be >= 1");
    size_t const bytes = static_cast<size_t>(bytesDouble);
    Stream stream;
    DeviceMemory src(bytes), dst(bytes);
    cudaOk(bench::fillNonZero(DataType::kINT8, src.ptr, bytes, 99, stream.stream), "fill");
    cudaOk(cudaMemsetAsync(dst.ptr, 0xFF, bytes, stream.stream), "poison");
    for (int r = 0; r < 3; ++r)
        cudaOk(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream.stream),
               "warm-up copy");
    cudaOk(cudaStreamSynchronize(stream.stream), "warm-up copy");
    uint64_t const spinNs = static_cast<uint64_t>(options.spinUs * 1000.0);
    Events events(static_cast<size_t>(repetitions));
    for (int64_t r = 0; r < repetitions; ++r)
    {
        if (spinNs) cudaOk(bench::launchSpin(spinNs, stream.stream), "spin");
        cudaOk(cudaEventRecord(events.start[r], stream.stream), "record");
        cudaOk(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream.stream), "copy");
        cudaOk(cudaEventRecord(events.stop[r], stream.stream), "record");
    }
    cudaOk(cudaStreamSynchronize(stream.stream), "timed copies");
    std::vector<double> samples;
    for (int64_t r = 0; r < repetitions; ++r) samples.push_back(events.us(static_cast<size_t>(r)));
    putStats(samples, results);
    results[kRotationSets] = 1;
    results[kInputBytes] = static_cast<double>(bytes);
    results[kOutputBytes] = static_cast<double>(bytes);
    results[kWorkspaceBytes] = 0;
    results[kL2Bytes] = deviceL2Bytes();
    results[kGraphs] = 0;
    results[kRotationBytes] = static_cast<double>(bytes);
}

//! Runs `body`, turning every exception into a non-zero return and a message.
template <typename Body>
int guarded(char* message, int messageLength, Body&& body) noexcept
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

void checkResults(double* results, int resultsLength)
{
    if (results == nullptr || resultsLength < kResultCount)
        fail("results must hold at least ", int{kResultCount}, " doubles");
    std::fill(results, results + resultsLength, std::nan(""));
}

void* gLibrary = nullptr;
std::string gLibraryPath;
}  // namespace

extern "C"
{
    __attribute__((visibility("default"))) int tpk_bench_result_count()
    {
        return kResultCount;
    }

    __attribute__((visibility("default"))) int tpk_bench_load(char const* library, char* message,
                                                              int messageLength)
    {
        return guarded(message, messageLength,
                       [&](std::string& text)
                       {
                           if (library == nullptr) fail("no library path");
                           if (gLibrary != nullptr)
                           {
                               if (gLibraryPath != library)
                                   fail("another plugin library is already loaded: ", gLibraryPath);
                               text = "already loaded";
                               return;
                           }
                           // As Triton: dlopen, and the library's static initializer registers with
                           // getPluginRegistry (ours, when this library was loaded RTLD_GLOBAL).
                           void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
                           if (handle == nullptr) fail("dlopen(", library, ") failed: ", dlerror());
                           using SetLoggerFinder = void (*)(ILoggerFinder*);
                           static harness::HarnessLoggerFinder finder(&logger());
                           if (auto setLoggerFinder =
                                   reinterpret_cast<SetLoggerFinder>(dlsym(handle, "setLoggerFinder")))
                           {
                               setLoggerFinder(&finder);
                           }
                           auto& registry = harness::HarnessRegistry::instance();
                           std::string how = "static registration";
                           if (registry.size() == 0)
                           {
                               // Not registered statically (this library was not global):
                               // IPluginRegistry::loadLibrary's way.
                               if (registry.loadLibrary(library) == nullptr)
                                   fail("no creators registered from ", library);
                               how = "getCreators";
                           }
                           int32_t n = 0;
                           auto* const* creators = registry.getAllCreators(&n);
                           text = std::to_string(n) + " creators (" + how + "):";
                           for (int32_t i = 0; i < n; ++i)
                           {
                               if (auto* v3 = harness::asV3Creator(creators[i]))
                                   text += std::string(" ") + v3->getPluginName();
                           }
                           gLibrary = handle;
                           gLibraryPath = library;
                       });
    }

    __attribute__((visibility("default"))) int tpk_bench_device(char* message, int messageLength)
    {
        return guarded(
            message, messageLength,
            [&](std::string& text)
            {
                int device = 0, driver = 0, runtime = 0;
                cudaOk(cudaGetDevice(&device), "cudaGetDevice");
                cudaDeviceProp prop{};
                cudaOk(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
                cudaOk(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
                cudaOk(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
                std::ostringstream out;
                out << "{\"name\": \"" << prop.name << "\", \"compute_capability\": \"" << prop.major << "."
                    << prop.minor << "\", \"multiprocessors\": " << prop.multiProcessorCount
                    << ", \"l2_bytes\": " << prop.l2CacheSize << ", \"memory_bytes\": " << prop.totalGlobalMem
                    << ", \"cuda_driver_api\": " << driver << ", \"cuda_runtime\": " << runtime << "}";
                text = out.str();
            });
    }

    __attribute__((visibility("default"))) int tpk_bench_plan(char const* plugin, char const* fields,
                                                              char const* io, double* results,
                                                              int resultsLength, char* message,
                                                              int messageLength)
    {
        return guarded(message, messageLength,
                       [&](std::string& text)
                       {
                           checkResults(results, resultsLength);
                           Planned p = plan(plugin ? plugin : "", fields ? fields : "", io ? io : "");
                           size_t in = 0, out = 0;
                           for (auto const& t : p.inputs) in += bytesOf(t);
                           for (auto const& t : p.outputs) out += bytesOf(t);
                           results[kInputBytes] = static_cast<double>(in);
                           results[kOutputBytes] = static_cast<double>(out);
                           results[kWorkspaceBytes] = static_cast<double>(p.workspaceBytes);
                           text = describe(p.outputs);
                       });
    }

    __attribute__((visibility("default"))) int tpk_bench_run(char const* plugin, char const* fields,
                                                             char const* io, int repetitions, int graphBatch,
                                                             char const* options, double* results,
                                                             int resultsLength, char* message,
                                                             int messageLength)
    {
        return guarded(message, messageLength,
                       [&](std::string& text)
                       {
                           checkResults(results, resultsLength);
                           run(plugin ? plugin : "", fields ? fields : "", io ? io : "", repetitions,
                               graphBatch, parseOptions(options), results, text);
                       });
    }

    __attribute__((visibility("default"))) int tpk_bench_chain(char const* spec, int repetitions,
                                                               char const* options, char* message,
                                                               int messageLength)
    {
        return guarded(message, messageLength,
                       [&](std::string& text)
                       { chain(spec ? spec : "", repetitions, parseOptions(options), text); });
    }

    __attribute__((visibility("default"))) int tpk_bench_copy(double bytes, int repetitions,
                                                              char const* options, double* results,
                                                              int resultsLength, char* message,
                                                              int messageLength)
    {
        return guarded(message, messageLength,
                       [&](std::string& text)
                       {
                           checkResults(results, resultsLength);
                           copy(bytes, repetitions, parseOptions(options), results);
                           text = "cudaMemcpyAsync device to device";
                       });
    }
}
