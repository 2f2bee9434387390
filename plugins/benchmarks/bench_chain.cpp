// The chains of libplugin_bench.so (tpk_bench_chain): several plugins joined by their tensors, one CUDA graph
// per forward, timed against a graph of as many empty kernels (the launch floor).
#include "bench_chain.h"

#include "tactic_choice.h"

namespace tpk_bench
{
namespace
{
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

//! The chain's nodes (spec: nodes "plugin#fields#io#sources" separated by '|', sources one per input: "in"
//! for a new external input or "k.o" for output o of node k), each planned, attached and given its shapes;
//! the external inputs in order.
struct ChainPlan
{
    std::vector<std::unique_ptr<ChainNode>> nodes;
    std::vector<TensorSpec> externals;
};

ChainPlan planChain(std::string const& spec)
{
    std::vector<std::string> const nodeSpecs = split(spec, '|');
    if (nodeSpecs.empty()) fail("the chain names no node");
    ChainPlan chainPlan;
    std::vector<std::unique_ptr<ChainNode>>& nodes = chainPlan.nodes;
    std::vector<TensorSpec>& externals = chainPlan.externals;
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
        attachForRuntime(*node, "chain node " + std::to_string(i) + " (" + parts[0] + ")");
        nodes.push_back(std::move(node));
    }
    if (externals.empty()) fail("the chain has no external input");
    return chainPlan;
}

//! Rotating sets of the external inputs (as run(): together > 2x L2 unless max_sets caps them); every set has
//! its own intermediate and final outputs. Fills each node's pointers per set; returns the set count and the
//! external inputs' bytes per set; `inSlabs` holds the external inputs.
std::pair<int64_t, size_t> allocateChainSets(ChainPlan& chainPlan, Options const& options,
                                             std::vector<std::unique_ptr<DeviceMemory>>& inSlabs,
                                             cudaStream_t stream)
{
    std::vector<std::unique_ptr<ChainNode>>& nodes = chainPlan.nodes;
    std::vector<TensorSpec> const& externals = chainPlan.externals;
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

    for (size_t e = 0; e < externals.size(); ++e)
    {
        size_t const slab = static_cast<size_t>(sets) * inPitch[e];
        inSlabs.push_back(std::make_unique<DeviceMemory>(slab));
        cudaOk(bench::fillNonZero(externals[e].type, inSlabs.back()->ptr,
                                  slab / harness::sizeOf(externals[e].type), 7000003ULL * (e + 1), stream),
               "fill chain inputs");
    }
    for (auto& node : nodes)
    {
        for (size_t o = 0; o < node->planned.outputs.size(); ++o)
        {
            size_t const slab = static_cast<size_t>(sets) * node->outPitch[o];
            node->outSlabs.push_back(std::make_unique<DeviceMemory>(slab));
            cudaOk(cudaMemsetAsync(node->outSlabs.back()->ptr, 0xFF, slab, stream), "poison outputs");
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
    cudaOk(cudaStreamSynchronize(stream), "fill");

    return {sets, inSet};
}

//! One graph per set, each one forward; the first graph's node count and kernel nodes.
std::pair<size_t, size_t> captureForwards(Graphs& graphs, std::function<void(int64_t)> const& forward,
                                          int64_t sets, cudaStream_t stream)
{
    size_t nodesPerGraph = 0, kernelNodes = 0;
    for (int64_t s = 0; s < sets; ++s)
    {
        cudaGraph_t graph = nullptr;
        cudaOk(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
        try
        {
            forward(s);
        }
        catch (...)
        {
            cudaStreamEndCapture(stream, &graph);
            if (graph) cudaGraphDestroy(graph);
            throw;
        }
        cudaOk(cudaStreamEndCapture(stream, &graph), "end capture (enqueue not capturable?)");
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
    return {nodesPerGraph, kernelNodes};
}

//! The launch floor: one graph of `nodes` empty-kernel nodes (one warp each).
void captureFloor(Graphs& empty, size_t nodes, cudaStream_t stream)
{
    cudaGraph_t graph = nullptr;
    cudaOk(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
    for (size_t i = 0; i < std::max<size_t>(nodes, 1); ++i) cudaOk(bench::launchEmpty(stream), "empty");
    cudaOk(cudaStreamEndCapture(stream, &graph), "end capture");
    cudaGraphExec_t exec = nullptr;
    cudaError_t const made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    cudaOk(made, "cudaGraphInstantiate");
    empty.execs.push_back(exec);
}
}  // namespace

//! A chain of plugins, one CUDA graph per forward, each forward on its own rotating set of external inputs;
//! and the launch-latency floor: a graph of as many empty-kernel nodes.
void chain(std::string const& spec, int64_t repetitions, Options const& options, std::string& json)
{
    if (repetitions < 1) fail("repetitions must be >= 1");
    ChainPlan chainPlan = planChain(spec);
    std::vector<std::unique_ptr<ChainNode>>& nodes = chainPlan.nodes;
    Stream stream;
    std::vector<std::unique_ptr<DeviceMemory>> inSlabs;
    std::pair<int64_t, size_t> const rotation = allocateChainSets(chainPlan, options, inSlabs, stream.stream);
    int64_t const sets = rotation.first;

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
        int32_t const tactic =
            chooseTactic(
                current.plugin, current.attached.get(), [&](int64_t set) { enqueueNode(current, set); }, sets,
                true, 0, stream.stream)
                .tactic;
        tactics += (tactics.empty() ? "" : ", ") + std::to_string(tactic);
    }

    // ---- one graph per set, each one forward
    Graphs graphs;
    std::pair<size_t, size_t> const counted = captureForwards(graphs, forward, sets, stream.stream);
    size_t const nodesPerGraph = counted.first, kernelNodes = counted.second;
    std::vector<double> const forwardUs = timeGraphs(graphs.execs, repetitions, options, stream.stream);

    // ---- the floor: one graph of as many empty-kernel nodes, timed the same way
    Graphs empty;
    captureFloor(empty, nodesPerGraph, stream.stream);
    std::vector<double> const floorUs = timeGraphs(empty.execs, repetitions, options, stream.stream);

    std::ostringstream out;
    out << "{\"forward\": " << statsJson(forwardUs) << ", \"floor\": " << statsJson(floorUs)
        << ", \"graph_nodes\": " << nodesPerGraph << ", \"kernel_nodes\": " << kernelNodes
        << ", \"rotation_sets\": " << sets << ", \"input_bytes\": " << rotation.second << ", \"tactics\": ["
        << tactics << "]}";
    json = out.str();
}

}  // namespace tpk_bench
