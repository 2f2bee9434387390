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
#include <dlfcn.h>

#include "bench_chain.h"
#include "tactic_choice.h"

namespace tpk_bench
{
namespace
{
//! Rotating sets of inputs and outputs, together larger than twice the L2 cache (or `rotateBytes`): each
//! set's tensors kPitchAlignment apart in one slab per tensor, the inputs non-zero random values, the outputs
//! the NaN poison.
struct RotatingSets
{
    int64_t count{0};
    size_t inSet{0};   // bytes of one set's inputs
    size_t outSet{0};  // and outputs
    std::vector<std::unique_ptr<DeviceMemory>> slabs;
    std::vector<void const*> inPtrs;  // set s, input i: inPtrs[s * nbIn + i]
    std::vector<void*> outPtrs;       // set s, output o: outPtrs[s * nbOut + o]
};

RotatingSets allocateSets(Planned const& p, Options const& options, cudaStream_t stream)
{
    RotatingSets r;
    size_t pitchSum = 0;
    std::vector<size_t> inPitch, outPitch;
    for (auto const& t : p.inputs)
    {
        r.inSet += bytesOf(t);
        inPitch.push_back(roundUp(std::max<size_t>(bytesOf(t), 1), kPitchAlignment));
        pitchSum += inPitch.back();
    }
    for (auto const& t : p.outputs)
    {
        r.outSet += bytesOf(t);
        outPitch.push_back(roundUp(std::max<size_t>(bytesOf(t), 1), kPitchAlignment));
        pitchSum += outPitch.back();
    }
    double const rotate = options.rotateBytes > 0 ? options.rotateBytes : 2.0 * deviceL2Bytes() + 1;
    int64_t const sets = std::max<int64_t>(
        2, std::min<int64_t>(
               static_cast<int64_t>(std::ceil(rotate / static_cast<double>(std::max<size_t>(r.inSet, 1)))),
               options.maxSets));
    size_t freeBytes = 0, totalBytes = 0;
    cudaOk(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
    double const need =
        static_cast<double>(sets) * static_cast<double>(pitchSum) + static_cast<double>(p.workspaceBytes);
    if (need > 0.85 * static_cast<double>(freeBytes))
        fail("needs ", need / (1 << 20), " MiB of GPU memory for ", sets, " rotating sets, ",
             freeBytes / (1 << 20), " MiB free");
    r.count = sets;
    size_t const nbIn = p.inputs.size(), nbOut = p.outputs.size();
    r.inPtrs.resize(static_cast<size_t>(sets) * nbIn);
    r.outPtrs.resize(static_cast<size_t>(sets) * nbOut);
    for (size_t i = 0; i < nbIn; ++i)
    {
        size_t const slab = static_cast<size_t>(sets) * inPitch[i];
        r.slabs.push_back(std::make_unique<DeviceMemory>(slab));
        cudaOk(bench::fillNonZero(p.inputs[i].type, r.slabs.back()->ptr,
                                  slab / harness::sizeOf(p.inputs[i].type),
                                  1000003ULL * static_cast<uint64_t>(i + 1), stream),
               "fill inputs");
        for (int64_t s = 0; s < sets; ++s)
            r.inPtrs[s * nbIn + i] = static_cast<char*>(r.slabs.back()->ptr) + s * inPitch[i];
    }
    for (size_t o = 0; o < nbOut; ++o)
    {
        size_t const slab = static_cast<size_t>(sets) * outPitch[o];
        r.slabs.push_back(std::make_unique<DeviceMemory>(slab));
        cudaOk(cudaMemsetAsync(r.slabs.back()->ptr, 0xFF, slab, stream), "poison outputs");  // NaN
        for (int64_t s = 0; s < sets; ++s)
            r.outPtrs[s * nbOut + o] = static_cast<char*>(r.slabs.back()->ptr) + s * outPitch[o];
    }
    cudaOk(cudaStreamSynchronize(stream), "fill");
    return r;
}

//! `warm` launches, which also estimate the time per launch, then as many timed ones as the time box allows:
//! [spin] start-event launch stop-event, each sample divided by the enqueues one launch makes. launch(i) is
//! called with i = 0, 1, 2, ... throughout, so the rotation over the sets never restarts.
std::vector<double> timeLaunches(std::function<void(int64_t)> const& launch, int64_t warm,
                                 int64_t enqueuesPerLaunch, int64_t repetitions, Options const& options,
                                 cudaStream_t stream, char const* what)
{
    Events probe(1);
    cudaOk(cudaEventRecord(probe.start[0], stream), "record");
    for (int64_t r = 0; r < warm; ++r) launch(r);
    cudaOk(cudaEventRecord(probe.stop[0], stream), "record");
    cudaOk(cudaStreamSynchronize(stream), what);
    double const estimate = probe.us(0) / static_cast<double>(warm);
    int64_t const reps = timeBoxed(repetitions, estimate, options.spinUs, options.maxSeconds);
    uint64_t const spinNs = static_cast<uint64_t>(options.spinUs * 1000.0);

    Events events(static_cast<size_t>(reps));
    for (int64_t r = 0; r < reps; ++r)
    {
        if (spinNs) cudaOk(bench::launchSpin(spinNs, stream), "spin");
        cudaOk(cudaEventRecord(events.start[r], stream), "record");
        launch(warm + r);
        cudaOk(cudaEventRecord(events.stop[r], stream), "record");
    }
    cudaOk(cudaStreamSynchronize(stream), what);
    std::vector<double> samples;
    for (int64_t r = 0; r < reps; ++r)
        samples.push_back(events.us(static_cast<size_t>(r)) / static_cast<double>(enqueuesPerLaunch));
    return samples;
}

//! Graphs of `graphBatch` enqueues each (enqueue(set) captured), together covering every one of `sets` once.
void captureGraphs(Graphs& graphs, std::function<int32_t(int64_t)> const& enqueue, int64_t sets,
                   int64_t graphBatch, cudaStream_t stream)
{
    int64_t const count = (sets + graphBatch - 1) / graphBatch;
    for (int64_t g = 0; g < count; ++g)
    {
        cudaGraph_t graph = nullptr;
        cudaOk(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
        int32_t status = 0;
        for (int64_t i = 0; i < graphBatch && status == 0; ++i) status = enqueue((g * graphBatch + i) % sets);
        cudaError_t const end = cudaStreamEndCapture(stream, &graph);
        if (status != 0 || end != cudaSuccess)
        {
            if (graph) cudaGraphDestroy(graph);
            cudaGetLastError();
            fail("enqueue is not capturable in a CUDA graph (enqueue ", status, ", ", cudaGetErrorString(end),
                 "): ", errorsLogged());
        }
        cudaGraphExec_t exec = nullptr;
        cudaError_t const made = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        cudaOk(made, "cudaGraphInstantiate");
        graphs.execs.push_back(exec);
    }
}

//! One case: TensorRT's build phase and round trip (plan), attach, the concrete shapes, rotating sets, a
//! checked first enqueue, the tactics chosen as TensorRT's builder chooses, then the timed enqueues (eager,
//! or CUDA graphs of `graphBatch`). `outputs` gets the outputs' description (and, on a second line, the
//! tactic timings).
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

    Stream stream;
    RotatingSets const sets = allocateSets(p, options, stream.stream);
    DeviceMemory workspace(p.workspaceBytes);
    auto enqueueStatus = [&](int64_t set)
    {
        return runtime->enqueue(inDescs.data(), outDescs.data(), &sets.inPtrs[set * nbIn],
                                &sets.outPtrs[set * nbOut], workspace.ptr, stream.stream);
    };
    auto enqueue = [&](int64_t set)
    {
        int32_t const status = enqueueStatus(set);
        if (status != 0) fail("enqueue returned ", status, ": ", errorsLogged());
    };

    // ---- one checked enqueue: it ran, and wrote its outputs
    enqueue(0);
    cudaOk(cudaStreamSynchronize(stream.stream), "first enqueue");
    for (int32_t o = 0; o < nbOut; ++o) checkWritten(p.outputs[o], sets.outPtrs[o], o);

    // ---- tactics, chosen as TensorRT's builder does: time each one, keep the fastest
    TacticChoice const choice = chooseTactic(pluginName, attached.get(), enqueue, sets.count, graphBatch > 0,
                                             static_cast<uint64_t>(options.spinUs * 1000.0), stream.stream);
    if (!choice.timings.empty()) outputs += "\n" + choice.timings;  // after the output description

    std::vector<double> samples;
    if (graphBatch == 0)
    {
        // ---- eager: one enqueue a launch, rotating the sets (at least 5 warm-up enqueues)
        int64_t const warm = std::max<int64_t>(5, std::min<int64_t>(sets.count, 200));
        samples = timeLaunches([&](int64_t r) { enqueue(r % sets.count); }, warm, 1, repetitions, options,
                               stream.stream, "timed enqueues");
        results[kGraphs] = 0;
    }
    else
    {
        // ---- graphs of `graphBatch` enqueues each, together covering every set once, replayed in turn
        Graphs graphs;
        captureGraphs(graphs, enqueueStatus, sets.count, graphBatch, stream.stream);
        int64_t const count = static_cast<int64_t>(graphs.execs.size());
        auto replay = [&](int64_t r)
        { cudaOk(cudaGraphLaunch(graphs.execs[r % count], stream.stream), "graph launch"); };
        samples = timeLaunches(replay, std::max<int64_t>(3, count), graphBatch, repetitions, options,
                               stream.stream, "timed graph replays");
        results[kGraphs] = static_cast<double>(count);
    }
    putStats(samples, results);
    results[kRotationSets] = static_cast<double>(sets.count);
    results[kInputBytes] = static_cast<double>(sets.inSet);
    results[kOutputBytes] = static_cast<double>(sets.outSet);
    results[kWorkspaceBytes] = static_cast<double>(p.workspaceBytes);
    results[kL2Bytes] = deviceL2Bytes();
    results[kRotationBytes] = static_cast<double>(sets.count) * static_cast<double>(sets.inSet);
    results[kTactic] = choice.timings.empty() ? NAN : static_cast<double>(choice.tactic);
    results[kTacticUs] = choice.us;
    results[kDefaultTacticUs] = choice.defaultUs;
}

//! The first pair's destination holds its source, byte for byte (a copy kernel that skips bytes is no peer).
void checkCopied(std::vector<std::unique_ptr<DeviceMemory>> const& src,
                 std::vector<std::unique_ptr<DeviceMemory>> const& dst, size_t bytes)
{
    size_t const piece = std::min<size_t>(bytes, size_t{64} << 20);
    std::vector<uint8_t> from(piece), to(piece);
    for (size_t offset = 0; offset < bytes; offset += piece)
    {
        size_t const n = std::min(piece, bytes - offset);
        cudaOk(cudaMemcpy(from.data(), static_cast<char const*>(src[0]->ptr) + offset, n,
                          cudaMemcpyDeviceToHost),
               "read copy source");
        cudaOk(
            cudaMemcpy(to.data(), static_cast<char const*>(dst[0]->ptr) + offset, n, cudaMemcpyDeviceToHost),
            "read copy destination");
        if (std::memcmp(from.data(), to.data(), n) != 0)
            fail("the copy differs from its source in bytes ", offset, " to ", offset + n);
    }
}

//! The copy options.copyKernel names (bench_support.h's Options) as a launch of `bytes` from src to dst,
//! and its description.
std::pair<std::function<cudaError_t(void*, void const*, size_t, cudaStream_t)>, std::string> copyLauncher(
    std::string const& spec)
{
    std::vector<std::string> const parts = split(spec, ':');
    if (spec == "memcpy")
        return {[](void* dst, void const* src, size_t bytes, cudaStream_t stream)
                { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream); },
                "cudaMemcpyAsync device to device"};
    if (parts.size() == 3 && parts[0] == "vector")
    {
        auto const blocks = static_cast<int>(parseInteger(parts[1], "vector copy's blocks an SM"));
        auto const unroll = static_cast<int>(parseInteger(parts[2], "vector copy's loads a thread"));
        if (blocks < 0 || blocks > 64) fail("vector copy's blocks an SM must be 0 to 64, got ", blocks);
        if (unroll != 1 && unroll != 2 && unroll != 4 && unroll != 8)
            fail("vector copy's loads a thread must be 1, 2, 4 or 8, got ", unroll);
        return {[blocks, unroll](void* dst, void const* src, size_t bytes, cudaStream_t stream)
                { return bench::launchVectorCopy(dst, src, bytes, blocks, unroll, stream); },
                "128-bit vector copy kernel, " + std::to_string(unroll) + " loads a thread, " +
                    (blocks ? "at most " + std::to_string(blocks) + " resident blocks of 256 an SM"
                            : "a block a tile")};
    }
    if (parts.size() == 3 && parts[0] == "bulk")
    {
        auto const stages = static_cast<int>(parseInteger(parts[1], "bulk copy's stages"));
        auto const kib = static_cast<size_t>(parseInteger(parts[2], "bulk copy's KiB a stage"));
        if (!bench::bulkCopyKernelRuns())
            fail("the bulk copy (TMA) kernel needs sm_90+ and this build's sm_90 code");
        return {
            [stages, kib](void* dst, void const* src, size_t bytes, cudaStream_t stream)
            { return bench::launchBulkCopy(dst, src, bytes, stages, kib * 1024, stream); },
            "TMA bulk copy ring, " + std::to_string(stages) + " stages of " + std::to_string(kib) + " KiB"};
    }
    fail("copy_kernel '", spec, "' is not memcpy, vector:BLOCKS_PER_SM:LOADS or bulk:STAGES:KIB");
}

//! A device-to-device copy of `bytes` (options.copyKernel's: cudaMemcpyAsync by default), timed as the
//! plugins are: a copy smaller than the rotation (2 x L2 + 1 by default) rotates over as many
//! source/destination pairs as make it DRAM-cold, as a plugin's inputs rotate (the 1 GiB roofline is one
//! pair; a case's same-size copy, several). The first copy of each pair is checked byte for byte. Returns the
//! copy's description.
std::string copy(double bytesDouble, int64_t repetitions, Options const& options, double* results)
{
    auto const [copyBytes, description] = copyLauncher(options.copyKernel);
    if (!(bytesDouble >= 1.0)) fail("copy bytes must be >= 1");
    if (repetitions < 1) fail("repetitions must be >= 1");
    size_t const bytes = static_cast<size_t>(bytesDouble);
    double const rotate = options.rotateBytes > 0 ? options.rotateBytes : 2.0 * deviceL2Bytes() + 1;
    auto const pairs = static_cast<size_t>(std::max(1.0, std::ceil(rotate / bytesDouble)));
    Stream stream;
    std::vector<std::unique_ptr<DeviceMemory>> src, dst;
    for (size_t i = 0; i < pairs; ++i)
    {
        src.push_back(std::make_unique<DeviceMemory>(bytes));
        dst.push_back(std::make_unique<DeviceMemory>(bytes));
        cudaOk(bench::fillNonZero(DataType::kINT8, src[i]->ptr, bytes, 99 + static_cast<uint64_t>(i),
                                  stream.stream),
               "fill");
        cudaOk(cudaMemsetAsync(dst[i]->ptr, 0xFF, bytes, stream.stream), "poison");
    }
    auto const launch = [&](int64_t r, char const* what)
    {
        size_t const i = static_cast<size_t>(r) % pairs;
        cudaOk(copyBytes(dst[i]->ptr, src[i]->ptr, bytes, stream.stream), what);
    };
    for (int64_t r = 0; r < static_cast<int64_t>(std::max<size_t>(3, pairs)); ++r) launch(r, "warm-up copy");
    cudaOk(cudaStreamSynchronize(stream.stream), "warm-up copy");
    checkCopied(src, dst, bytes);
    uint64_t const spinNs = static_cast<uint64_t>(options.spinUs * 1000.0);
    Events events(static_cast<size_t>(repetitions));
    for (int64_t r = 0; r < repetitions; ++r)
    {
        if (spinNs) cudaOk(bench::launchSpin(spinNs, stream.stream), "spin");
        cudaOk(cudaEventRecord(events.start[r], stream.stream), "record");
        launch(r, "copy");
        cudaOk(cudaEventRecord(events.stop[r], stream.stream), "record");
    }
    cudaOk(cudaStreamSynchronize(stream.stream), "timed copies");
    std::vector<double> samples;
    for (int64_t r = 0; r < repetitions; ++r) samples.push_back(events.us(static_cast<size_t>(r)));
    putStats(samples, results);
    results[kRotationSets] = static_cast<double>(pairs);
    results[kInputBytes] = static_cast<double>(bytes);
    results[kOutputBytes] = static_cast<double>(bytes);
    results[kWorkspaceBytes] = 0;
    results[kL2Bytes] = deviceL2Bytes();
    results[kGraphs] = 0;
    results[kRotationBytes] = static_cast<double>(pairs) * static_cast<double>(bytes);
    return description;
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
}  // namespace tpk_bench

using namespace tpk_bench;

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
                           text = copy(bytes, repetitions, parseOptions(options), results);
                       });
    }
}
