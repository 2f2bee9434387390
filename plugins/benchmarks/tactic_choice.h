// Tactics chosen as TensorRT's builder chooses them: every tactic the plugin lists, and the default (0),
// timed the way the benchmark measures the case; the fastest set. Shared by the cases (plugin_bench.cpp) and
// the chains (bench_chain.cpp).
#pragma once

#include "bench_support.h"

namespace tpk_bench
{
//! A plugin's tactics as chooseTactic timed them.
struct TacticChoice
{
    int32_t tactic{0};
    double us{NAN};         // the chosen tactic's time
    double defaultUs{NAN};  // tactic 0's
    std::string timings;    // "0:us 1:us ...", every tactic in the order timed; empty: no tactics
};

//! Time per enqueue of the plugin's current tactic, timed the way the case is measured: small enqueues inside
//! a CUDA graph when `inGraph`, so that launch overhead does not pick the tactic (eager timing chose a slower
//! one for FC at batch 1), best of five; otherwise one enqueue after the GPU wait kernel, the median of 15
//! (back-to-back enqueues overlap one another).
inline double timeTactic(std::function<void(int64_t)> const& enqueue, int64_t sets, bool inGraph,
                         uint64_t spinNs, cudaStream_t stream)
{
    for (int64_t r = 0; r < 3; ++r) enqueue(r % sets);
    constexpr int64_t kTacticReps = 20;
    if (inGraph)
    {
        cudaGraph_t graph = nullptr;
        cudaOk(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
        for (int64_t r = 0; r < kTacticReps; ++r) enqueue(r % sets);
        cudaOk(cudaStreamEndCapture(stream, &graph), "end capture");
        cudaGraphExec_t exec = nullptr;
        cudaError_t const made = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        cudaOk(made, "cudaGraphInstantiate");
        cudaOk(cudaGraphLaunch(exec, stream), "graph launch");
        double us = INFINITY;
        for (int trial = 0; trial < 5; ++trial)  // best of five: the fastest tactics differ by a few percent
        {
            Events timing(1);
            cudaOk(cudaEventRecord(timing.start[0], stream), "record");
            cudaOk(cudaGraphLaunch(exec, stream), "graph launch");
            cudaOk(cudaEventRecord(timing.stop[0], stream), "record");
            cudaOk(cudaStreamSynchronize(stream), "tactic timing");
            us = std::min(us, timing.us(0) / static_cast<double>(kTacticReps));
        }
        cudaGraphExecDestroy(exec);
        return us;
    }
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
    return samples[samples.size() / 2];
}

//! Tactics, chosen as TensorRT's builder does: time the default (0) and every tactic getValidTactics lists,
//! keep the fastest (and set it). Without tactics, nothing is timed (tactic 0, no timings).
inline TacticChoice chooseTactic(std::string const& pluginName, IPluginV3* plugin,
                                 std::function<void(int64_t)> const& enqueue, int64_t sets, bool inGraph,
                                 uint64_t spinNs, cudaStream_t stream)
{
    Capabilities const caps = capabilitiesOf(plugin);
    int32_t const nbTactics = caps.build->getNbTactics();
    TacticChoice choice;
    if (nbTactics <= 0) return choice;
    std::vector<int32_t> tactics(static_cast<size_t>(nbTactics) + 1, 0);  // 0 first: the default
    if (caps.build->getValidTactics(tactics.data() + 1, nbTactics) != 0)
        fail("getValidTactics failed: ", errorsLogged());
    double bestUs = INFINITY;
    for (int32_t tactic : tactics)
    {
        if (caps.runtime->setTactic(tactic) != 0) fail("setTactic(", tactic, ") failed: ", errorsLogged());
        double const us = timeTactic(enqueue, sets, inGraph, spinNs, stream);
        choice.timings += (choice.timings.empty() ? "" : " ") + std::to_string(tactic) + ":" +
                          std::to_string(us).substr(0, 7);
        if (tactic == 0) choice.defaultUs = us;
        if (us < bestUs)
        {
            bestUs = us;
            choice.tactic = tactic;
        }
    }
    choice.us = bestUs;
    if (caps.runtime->setTactic(choice.tactic) != 0)
        fail("setTactic(", choice.tactic, ") failed: ", errorsLogged());
    std::printf("  %s: tactics (us per enqueue) %s -> tactic %d\n", pluginName.c_str(),
                choice.timings.c_str(), choice.tactic);
    std::fflush(stdout);
    return choice;
}

}  // namespace tpk_bench
