// plugin_stress lifecycle: what a long-running server does to a plugin each time an engine is loaded and an
// execution context created, repeated: createPlugin(kRUNTIME) from the engine's stored fields ->
// attachToContext -> onShapeChange -> enqueue -> destroy. Device memory in use (cudaMemGetInfo) and the
// process's resident set (/proc/self/statm) are sampled along the way; after a warm-up (lazy module loading,
// allocator caches) neither may grow by more than the stated bounds.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "conformance/runner.h"
#include "stress/stress_common.h"

namespace stress
{
using namespace nvinfer1;

namespace
{
constexpr double kMiB = 1024.0 * 1024.0;

//! The plugin's lifecycle case: its first FP32 case with at most `maxElements` input elements.
harness::Case const* lifecycleCase(std::string const& plugin, int64_t maxElements)
{
    harness::Case const* fallback = nullptr;
    for (auto const& c : conformanceSuite().cases)
    {
        if (c.plugin != plugin || inputElements(c) > maxElements) continue;
        if (c.inputs[0].type == DataType::kFLOAT) return &c;
        if (fallback == nullptr) fallback = &c;
    }
    return fallback;
}

std::string verifyOutputs(harness::Case const& c, std::vector<std::unique_ptr<DeviceMemory>> const& dOut,
                          std::vector<harness::Reference> const& references, double& worst)
{
    for (size_t o = 0; o < c.outputs.size(); ++o)
    {
        harness::HostTensor got(c.outputs[o].type, c.outputs[o].dims);
        cudaOk(cudaMemcpy(got.bytes.data(), dOut[o]->get(), got.bytes.size(), cudaMemcpyDeviceToHost),
               "download");
        std::string where;
        double const err = maxError(got, references[o], where);
        worst = std::max(worst, err);
        if (!(err <= c.tolerance))
        {
            std::ostringstream out;
            out << "output " << o << " error " << err << " > " << c.tolerance << " at " << where;
            return out.str();
        }
    }
    return {};
}

void runPlugin(std::string const& plugin, harness::Case const& c, LifecycleOptions const& options,
               harness::RecordingLogger& logger, Counts& counts)
{
    std::string const what = "lifecycle " + plugin + " " + c.label;
    int64_t const cycles = std::max<int64_t>(options.cycles, 2);
    int64_t warmup = options.warmup >= 0 ? options.warmup : std::max<int64_t>(20, cycles / 10);
    if (warmup >= cycles) warmup = cycles / 2;
    int64_t const sampleEvery =
        options.sampleEvery > 0 ? options.sampleEvery : std::max<int64_t>(1, cycles / 20);
    try
    {
        setContext(what + ": setup");
        logger.take();
        IPluginCreatorV3One* creator = harness::findCreator(plugin);
        if (creator == nullptr) throw std::runtime_error("no creator in the registry");

        // The engine: a build-phase plugin configured for the case, its fields serialized into the "plan".
        harness::FieldSet fields = c.fields;
        PluginPtr built(creator->createPlugin("lifecycle", fields.collection(), TensorRTPhase::kBUILD));
        std::string problem;
        Capabilities builtCaps = capabilitiesOf(built.get(), plugin, problem);
        if (!problem.empty())
            throw std::runtime_error("createPlugin(kBUILD): " + problem + " " + errorsLogged(logger));
        int32_t const nbIn = static_cast<int32_t>(c.inputs.size());
        int32_t const nbOut = static_cast<int32_t>(c.outputs.size());
        auto inDyn = dynamicDescs(c.inputs);
        auto outDyn = dynamicDescs(c.outputs);
        if (builtCaps.build->configurePlugin(inDyn.data(), nbIn, outDyn.data(), nbOut) != 0)
            throw std::runtime_error("configurePlugin failed: " + errorsLogged(logger));
        size_t const workspaceBytes =
            builtCaps.build->getWorkspaceSize(inDyn.data(), nbIn, outDyn.data(), nbOut);
        harness::SerializedFields stored(builtCaps.runtime->getFieldsToSerialize());
        built.reset();

        // Inputs uploaded once; the cycles re-run the same enqueue, checked against the reference at the
        // first and the last cycle.
        std::mt19937 rng(1234U);
        std::vector<harness::HostTensor> inputs;
        for (auto const& s : c.inputs) inputs.emplace_back(s.type, s.dims);
        std::vector<harness::Reference> references(c.outputs.size());
        c.generate(inputs, references, rng);
        DeviceTensors const device(c.inputs, c.outputs);
        device.upload(inputs);
        DeviceMemory workspace(workspaceBytes);
        Stream stream;
        harness::HarnessResourceContext context;
        auto const inRt = runtimeDescs(c.inputs);
        auto const outRt = runtimeDescs(c.outputs);

        std::vector<MemorySample> samples;
        MemorySample baseline;
        double worst = 0.0;
        if (warmup == 0)
        {
            baseline = sampleMemory(0);
            samples.push_back(baseline);
        }
        for (int64_t cycle = 0; cycle < cycles; ++cycle)
        {
            if (cycle % 1000 == 0) setContext(what + ": cycle " + std::to_string(cycle));
            PluginPtr runtime(
                creator->createPlugin("lifecycle", stored.collection(), TensorRTPhase::kRUNTIME));
            if (!runtime) throw std::runtime_error("createPlugin(kRUNTIME) failed: " + errorsLogged(logger));
            Capabilities runtimeCaps = capabilitiesOf(runtime.get(), plugin, problem);
            if (!problem.empty()) throw std::runtime_error(problem);
            PluginPtr attached(runtimeCaps.runtime->attachToContext(&context));
            if (!attached) throw std::runtime_error("attachToContext failed: " + errorsLogged(logger));
            runtime.reset();  // TensorRT may release the engine's copy before the context's.
            Capabilities caps = capabilitiesOf(attached.get(), plugin, problem);
            if (!problem.empty()) throw std::runtime_error("attached plugin: " + problem);
            if (caps.runtime->onShapeChange(inRt.data(), nbIn, outRt.data(), nbOut) != 0)
                throw std::runtime_error("onShapeChange failed: " + errorsLogged(logger));
            bool const verify = cycle == 0 || cycle == cycles - 1;
            if (verify)
            {
                device.poisonOutputs(stream.get());
            }
            if (caps.runtime->enqueue(inRt.data(), outRt.data(), device.inPtrs.data(), device.outPtrs.data(),
                                      workspace.get(), stream.get()) != 0)
                throw std::runtime_error("enqueue failed: " + errorsLogged(logger));
            cudaOk(cudaStreamSynchronize(stream.get()), "kernel execution");
            if (verify)
            {
                std::string const wrong = verifyOutputs(c, device.out, references, worst);
                if (!wrong.empty()) throw std::runtime_error("wrong result: " + wrong);
            }
            attached.reset();
            logger.take();
            int64_t const done = cycle + 1;
            if ((warmup > 0 && done == warmup) || done % sampleEvery == 0 || done == cycles)
            {
                MemorySample const sample = sampleMemory(done);
                if (done == warmup) baseline = sample;
                if (done >= warmup) samples.push_back(sample);
            }
        }

        MemorySample const& last = samples.back();
        double const gpuGrowth = static_cast<double>(last.gpuUsed - baseline.gpuUsed) / kMiB;
        double const hostGrowth = static_cast<double>(last.hostRss - baseline.hostRss) / kMiB;
        std::ostringstream table;
        table.setf(std::ios::fixed);
        table.precision(2);
        table << "  " << plugin << " samples after cycle N (GPU in use MiB / host RSS MiB, relative to cycle "
              << warmup << ": " << static_cast<double>(baseline.gpuUsed) / kMiB << " / "
              << static_cast<double>(baseline.hostRss) / kMiB << "):";
        for (auto const& s : samples)
        {
            table << " " << s.cycle << ":" << static_cast<double>(s.gpuUsed - baseline.gpuUsed) / kMiB << "/"
                  << static_cast<double>(s.hostRss - baseline.hostRss) / kMiB;
        }
        std::printf("%s\n", table.str().c_str());

        std::ostringstream detail;
        detail.setf(std::ios::fixed);
        detail.precision(2);
        detail << cycles
               << " cycles (create kRUNTIME -> attach -> onShapeChange -> enqueue -> destroy), results "
               << "checked at the first and last cycle (worst error " << std::scientific << worst
               << std::fixed << "); growth after the " << warmup << "-cycle warm-up: GPU " << gpuGrowth
               << " MiB";
        bool pass = true;
        if (options.checkBounds)
        {
            detail << " (bound " << options.gpuBoundMiB << "), host RSS " << hostGrowth << " MiB (bound "
                   << options.hostBoundMiB << ")";
            pass = gpuGrowth <= options.gpuBoundMiB && hostGrowth <= options.hostBoundMiB;
        }
        else
        {
            detail << ", host RSS " << hostGrowth << " MiB (not judged: --no-memory-bounds)";
        }
        counts.record(pass, what, detail.str());
    }
    catch (std::exception const& e)
    {
        counts.record(false, what, e.what());
        cudaGetLastError();
    }
}
}  // namespace

void runLifecycle(LifecycleOptions const& options, harness::RecordingLogger& logger, Counts& counts)
{
    if (!requireGpu("lifecycle", counts)) return;
    std::printf(
        "lifecycle: %lld cycles per plugin; bounds after warm-up: GPU %.2f MiB, host RSS %.2f MiB%s\n",
        static_cast<long long>(options.cycles), options.gpuBoundMiB, options.hostBoundMiB,
        options.checkBounds ? "" : " (not judged)");
    std::fflush(stdout);
    for (auto const& plugin : pluginNames())
    {
        if (!options.plugin.empty() && options.plugin != plugin) continue;
        harness::Case const* c = lifecycleCase(plugin, options.maxElements);
        if (c == nullptr)
        {
            counts.record(false, "lifecycle " + plugin,
                          "no conformance case with at most " + std::to_string(options.maxElements) +
                              " input elements");
            continue;
        }
        runPlugin(plugin, *c, options, logger, counts);
    }
}

}  // namespace stress
