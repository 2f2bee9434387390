// plugin_stress concurrency: what Triton does with several model instances and execution contexts of one
// engine. For each small conformance case: one "engine" plugin is created from the stored fields; every
// thread gets its own attached clone (even threads attach the shared engine plugin, at the same time; odd
// threads first create their own runtime plugin, as a second model instance deserializing the same plan),
// its own stream and buffers, and enqueues with its own data, all threads at once. Every output is checked
// against the case's float64 reference.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iomanip>
#include <set>
#include <sstream>
#include <thread>

#include "conformance/runner.h"
#include "stress/stress_common.h"

namespace stress
{
using namespace nvinfer1;

namespace
{
struct ThreadResult
{
    std::string problem;  // empty: every output matched
    double worst{0.0};
    int64_t enqueues{0};
};

struct Dataset
{
    std::vector<harness::HostTensor> inputs;
    std::vector<harness::Reference> references;
};

//! The cases of `plugin` with at most maxElements input elements; with a cap, one of each input type first.
std::vector<size_t> concurrencyCases(std::string const& plugin, ConcurrencyOptions const& options)
{
    auto const& cases = conformanceSuite().cases;
    std::vector<size_t> small;
    for (size_t i = 0; i < cases.size(); ++i)
        if (cases[i].plugin == plugin && inputElements(cases[i]) <= options.maxElements) small.push_back(i);
    if (options.maxCasesPerPlugin <= 0 || small.size() <= static_cast<size_t>(options.maxCasesPerPlugin))
        return small;
    std::vector<size_t> chosen;
    std::set<int> types;
    for (size_t i : small)
    {
        if (types.insert(static_cast<int>(cases[i].inputs[0].type)).second) chosen.push_back(i);
    }
    for (size_t i : small)
    {
        if (std::find(chosen.begin(), chosen.end(), i) == chosen.end()) chosen.push_back(i);
    }
    chosen.resize(static_cast<size_t>(options.maxCasesPerPlugin));
    std::sort(chosen.begin(), chosen.end());
    return chosen;
}

void threadBody(harness::Case const& c, size_t caseIndex, int32_t thread, IPluginCreatorV3One* creator,
                IPluginV3OneRuntime* engine, harness::SerializedFields& stored,
                ConcurrencyOptions const& options, std::atomic<int32_t>& arrived, std::atomic<bool>& go,
                harness::RecordingLogger& logger, ThreadResult& result)
{
    bool hasArrived = false;
    auto arrive = [&]
    {
        if (!hasArrived)
        {
            hasArrived = true;
            arrived.fetch_add(1);
        }
    };
    try
    {
        int32_t const nbIn = static_cast<int32_t>(c.inputs.size());
        int32_t const nbOut = static_cast<int32_t>(c.outputs.size());
        harness::HarnessResourceContext context;
        std::string problem;
        PluginPtr attached;
        if (thread % 2 == 0)
        {
            attached.reset(engine->attachToContext(&context));
        }
        else
        {
            // This thread's copy of the stored fields: the creator runs in several threads at once.
            PluginPtr own(creator->createPlugin("concurrency", stored.collection(), TensorRTPhase::kRUNTIME));
            if (!own) throw std::runtime_error("createPlugin(kRUNTIME) failed in a thread");
            Capabilities ownCaps = capabilitiesOf(own.get(), c.plugin, problem);
            if (!problem.empty()) throw std::runtime_error(problem);
            attached.reset(ownCaps.runtime->attachToContext(&context));
        }
        if (!attached) throw std::runtime_error("attachToContext returned null");
        Capabilities caps = capabilitiesOf(attached.get(), c.plugin, problem);
        if (!problem.empty()) throw std::runtime_error(problem);
        auto const inRt = runtimeDescs(c.inputs);
        auto const outRt = runtimeDescs(c.outputs);
        if (caps.runtime->onShapeChange(inRt.data(), nbIn, outRt.data(), nbOut) != 0)
            throw std::runtime_error("onShapeChange failed");

        // Per-thread data: different seeds per thread and dataset, so no two threads compute the same thing.
        std::vector<Dataset> datasets(static_cast<size_t>(std::max(options.datasetsPerThread, 1)));
        for (size_t d = 0; d < datasets.size(); ++d)
        {
            std::mt19937 rng(
                static_cast<unsigned>(7919U * caseIndex + 104729U * static_cast<unsigned>(thread) + d + 1));
            for (auto const& s : c.inputs) datasets[d].inputs.emplace_back(s.type, s.dims);
            datasets[d].references.resize(c.outputs.size());
            c.generate(datasets[d].inputs, datasets[d].references, rng);
        }
        Stream stream;
        DeviceTensors const device(c.inputs, c.outputs);
        std::vector<harness::HostTensor> outputs;
        for (auto const& s : c.outputs) outputs.emplace_back(s.type, s.dims);
        size_t workspaceBytes = 0;
        {
            auto inDyn = dynamicDescs(c.inputs);
            auto outDyn = dynamicDescs(c.outputs);
            workspaceBytes = caps.build->getWorkspaceSize(inDyn.data(), nbIn, outDyn.data(), nbOut);
        }
        DeviceMemory workspace(workspaceBytes);

        arrive();
        while (!go.load())
        {
            std::this_thread::yield();
        }
        for (int64_t it = 0; it < options.iterations; ++it)
        {
            Dataset const& data = datasets[static_cast<size_t>(it) % datasets.size()];
            for (size_t i = 0; i < data.inputs.size(); ++i)
            {
                cudaOk(cudaMemcpyAsync(device.in[i]->get(), data.inputs[i].bytes.data(),
                                       data.inputs[i].bytes.size(), cudaMemcpyHostToDevice, stream.get()),
                       "upload");
            }
            device.poisonOutputs(stream.get());
            if (caps.runtime->enqueue(inRt.data(), outRt.data(), device.inPtrs.data(), device.outPtrs.data(),
                                      workspace.get(), stream.get()) != 0)
                throw std::runtime_error("enqueue failed at iteration " + std::to_string(it));
            for (size_t o = 0; o < outputs.size(); ++o)
            {
                cudaOk(cudaMemcpyAsync(outputs[o].bytes.data(), device.out[o]->get(), outputs[o].bytes.size(),
                                       cudaMemcpyDeviceToHost, stream.get()),
                       "download");
            }
            cudaOk(cudaStreamSynchronize(stream.get()), "kernel execution");
            ++result.enqueues;
            for (size_t o = 0; o < outputs.size(); ++o)
            {
                std::string where;
                double const err = maxError(outputs[o], data.references[o], where);
                result.worst = std::max(result.worst, err);
                if (!(err <= c.tolerance))
                {
                    std::ostringstream out;
                    out << "thread " << thread << " iteration " << it << " output " << o << ": error " << err
                        << " > " << c.tolerance << " at " << where;
                    throw std::runtime_error(out.str());
                }
            }
        }
    }
    catch (std::exception const& e)
    {
        result.problem = e.what();
        std::string const errors = errorsLogged(logger);
        if (!errors.empty()) result.problem += " (logged: " + errors + ")";
    }
    arrive();
}

void runCase(size_t caseIndex, ConcurrencyOptions const& options, harness::RecordingLogger& logger,
             Counts& counts)
{
    harness::Case const& c = conformanceSuite().cases[caseIndex];
    std::string const what = "concurrency " + c.plugin + " " + c.label;
    setContext(what);
    try
    {
        logger.take();
        IPluginCreatorV3One* creator = harness::findCreator(c.plugin);
        if (creator == nullptr) throw std::runtime_error("no creator in the registry");
        harness::FieldSet fields = c.fields;
        PluginPtr built(creator->createPlugin("concurrency", fields.collection(), TensorRTPhase::kBUILD));
        std::string problem;
        Capabilities builtCaps = capabilitiesOf(built.get(), c.plugin, problem);
        if (!problem.empty()) throw std::runtime_error("createPlugin(kBUILD): " + problem);
        int32_t const nbIn = static_cast<int32_t>(c.inputs.size());
        int32_t const nbOut = static_cast<int32_t>(c.outputs.size());
        auto inDyn = dynamicDescs(c.inputs);
        auto outDyn = dynamicDescs(c.outputs);
        if (builtCaps.build->configurePlugin(inDyn.data(), nbIn, outDyn.data(), nbOut) != 0)
            throw std::runtime_error("configurePlugin failed: " + errorsLogged(logger));
        harness::SerializedFields stored(builtCaps.runtime->getFieldsToSerialize());
        built.reset();
        PluginPtr engine(creator->createPlugin("concurrency", stored.collection(), TensorRTPhase::kRUNTIME));
        Capabilities engineCaps = capabilitiesOf(engine.get(), c.plugin, problem);
        if (!problem.empty()) throw std::runtime_error("createPlugin(kRUNTIME): " + problem);

        int32_t const threads = std::max(options.threads, 1);
        std::vector<ThreadResult> results(static_cast<size_t>(threads));
        std::vector<harness::SerializedFields> storedCopies(static_cast<size_t>(threads), stored);
        std::atomic<int32_t> arrived{0};
        std::atomic<bool> go{false};
        std::vector<std::thread> workers;
        for (int32_t t = 0; t < threads; ++t)
        {
            workers.emplace_back(threadBody, std::cref(c), caseIndex, t, creator, engineCaps.runtime,
                                 std::ref(storedCopies[static_cast<size_t>(t)]), std::cref(options),
                                 std::ref(arrived), std::ref(go), std::ref(logger),
                                 std::ref(results[static_cast<size_t>(t)]));
        }
        while (arrived.load() < threads)
        {
            std::this_thread::yield();
        }
        go.store(true);  // every thread is set up: they all start enqueuing now
        for (auto& w : workers) w.join();
        engine.reset();

        std::string failures;
        double worst = 0.0;
        int64_t enqueues = 0;
        for (auto const& r : results)
        {
            if (!r.problem.empty() && failures.size() < 600)
                failures += (failures.empty() ? "" : "; ") + r.problem;
            worst = std::max(worst, r.worst);
            enqueues += r.enqueues;
        }
        std::ostringstream detail;
        detail << threads << " threads x " << options.iterations
               << " enqueues, each on its own attached clone and stream "
               << "with its own data: " << enqueues << " outputs checked, worst error " << std::scientific
               << std::setprecision(2) << worst << " (bound " << c.tolerance << ")";
        if (!failures.empty()) detail << "; " << failures;
        counts.record(failures.empty(), what, detail.str());
    }
    catch (std::exception const& e)
    {
        counts.record(false, what, e.what());
    }
    cudaGetLastError();
}
}  // namespace

void runConcurrency(ConcurrencyOptions const& options, harness::RecordingLogger& logger, Counts& counts)
{
    if (!requireGpu("concurrency", counts)) return;
    std::printf(
        "concurrency: %d threads x %lld iterations per case, cases of at most %lld input elements%s\n",
        options.threads, static_cast<long long>(options.iterations),
        static_cast<long long>(options.maxElements),
        options.maxCasesPerPlugin > 0
            ? (", at most " + std::to_string(options.maxCasesPerPlugin) + " per plugin").c_str()
            : "");
    std::fflush(stdout);
    for (auto const& plugin : pluginNames())
    {
        if (!options.plugin.empty() && options.plugin != plugin) continue;
        std::vector<size_t> const cases = concurrencyCases(plugin, options);
        if (cases.empty())
        {
            counts.record(false, "concurrency " + plugin,
                          "no conformance case with at most " + std::to_string(options.maxElements) +
                              " input elements");
            continue;
        }
        for (size_t index : cases)
        {
            runCase(index, options, logger, counts);
        }
    }
}

}  // namespace stress
