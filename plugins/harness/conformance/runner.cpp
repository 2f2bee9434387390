#include "conformance/runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "core/sequence.h"
#include "core/tool_support.h"

namespace harness
{
using namespace nvinfer1;

namespace
{
//! Thrown by the steps below; the message says which TensorRT call misbehaved.
struct StepFailure : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

template <typename... Parts>
[[noreturn]] void failStep(Parts const&... parts)
{
    std::ostringstream out;
    (out << ... << parts);
    throw StepFailure(out.str());
}

//! The capability interfaces, or a StepFailure saying what is wrong with them.
Capabilities checkedCapabilities(IPluginV3* plugin, std::string const& expectedName)
{
    std::string problem;
    Capabilities const caps = capabilitiesOf(plugin, expectedName, problem);
    if (!problem.empty())
    {
        failStep(problem);
    }
    return caps;
}

//! getOutputShapes twice: with constant dims (exact result) and with dimension 0 of every input symbolic,
//! evaluated afterwards (what TensorRT does for a dynamic batch).
void checkOutputShapes(IPluginV3OneBuild* build, std::vector<TensorSpec> const& inputs,
                       std::vector<TensorSpec> const& outputs)
{
    int32_t const nbIn = static_cast<int32_t>(inputs.size());
    int32_t const nbOut = static_cast<int32_t>(outputs.size());
    for (bool symbolic : {false, true})
    {
        HarnessExprBuilder builder;
        std::vector<DimsExprs> in(inputs.size());
        std::map<int32_t, int64_t> bindings;
        for (int32_t i = 0; i < nbIn; ++i)
        {
            in[i].nbDims = inputs[i].dims.nbDims;
            for (int32_t d = 0; d < in[i].nbDims; ++d)
            {
                bool const makeSymbol = symbolic && d == 0;
                in[i].d[d] = makeSymbol ? builder.symbol(i) : builder.constant(inputs[i].dims.d[d]);
                if (makeSymbol)
                {
                    bindings[i] = inputs[i].dims.d[0];
                }
            }
        }
        std::vector<DimsExprs> out(outputs.size());
        if (build->getOutputShapes(in.data(), nbIn, nullptr, 0, out.data(), nbOut, builder) != 0)
        {
            failStep("getOutputShapes failed", symbolic ? " (symbolic batch)" : "");
        }
        for (int32_t o = 0; o < nbOut; ++o)
        {
            Dims got{};
            got.nbDims = out[o].nbDims;
            for (int32_t d = 0; d < got.nbDims; ++d)
            {
                if (!symbolic && !out[o].d[d]->isConstant())
                {
                    failStep("getOutputShapes: output ", o, " dim ", d,
                             " is not constant for constant inputs");
                }
                got.d[d] = HarnessExprBuilder::evaluate(out[o].d[d], bindings);
            }
            if (toString(got) != toString(outputs[o].dims))
            {
                failStep("getOutputShapes: output ", o, " is ", toString(got), ", expected ",
                         toString(outputs[o].dims), symbolic ? " (symbolic batch)" : "");
            }
        }
    }
}

//! supportsFormatCombination over every type and format TensorRT might offer, position by position, with
//! earlier positions fixed to the case's choice (as TensorRT's format search does).
void checkFormats(IPluginV3OneBuild* build, std::vector<TensorSpec> const& inputs,
                  std::vector<TensorSpec> const& outputs)
{
    std::vector<TensorSpec> all(inputs);
    all.insert(all.end(), outputs.begin(), outputs.end());
    auto descs = dynamicDescs(all, true);
    int32_t const nbIn = static_cast<int32_t>(inputs.size());
    int32_t const nbOut = static_cast<int32_t>(outputs.size());
    DataType const types[] = {DataType::kFLOAT, DataType::kHALF,  DataType::kINT8, DataType::kINT32,
                              DataType::kBOOL,  DataType::kUINT8, DataType::kBF16, DataType::kINT64};
    TensorFormat const formats[] = {TensorFormat::kLINEAR, TensorFormat::kCHW2,  TensorFormat::kHWC8,
                                    TensorFormat::kCHW4,   TensorFormat::kCHW32, TensorFormat::kHWC};
    for (int32_t pos = 0; pos < nbIn + nbOut; ++pos)
    {
        bool chosenAccepted = false;
        for (DataType type : types)
        {
            for (TensorFormat format : formats)
            {
                descs[pos].desc.type = type;
                descs[pos].desc.format = format;
                bool const ok = build->supportsFormatCombination(pos, descs.data(), nbIn, nbOut);
                if (ok && format != TensorFormat::kLINEAR)
                {
                    failStep("supportsFormatCombination accepts a non-linear format at position ", pos);
                }
                chosenAccepted =
                    chosenAccepted || (ok && type == all[pos].type && format == TensorFormat::kLINEAR);
            }
        }
        if (!chosenAccepted)
        {
            failStep("supportsFormatCombination rejects ", typeName(all[pos].type), " linear at position ",
                     pos);
        }
        descs[pos].desc.type = all[pos].type;
        descs[pos].desc.format = TensorFormat::kLINEAR;
    }
}

void writeNpy(std::string const& path, HostTensor const& source)
{
    // NumPy has no bfloat16: BF16 tensors are written as the float32 values they are exactly (the JSON's
    // tolerance is BF16's, so the cross-check still holds them to it).
    HostTensor widened;
    if (source.type == DataType::kBF16)
    {
        widened = HostTensor(DataType::kFLOAT, source.dims);
        for (int64_t i = 0; i < source.count(); ++i) widened.set(i, source.get(i));
    }
    HostTensor const& t = source.type == DataType::kBF16 ? widened : source;
    char const* descr = t.type == DataType::kFLOAT  ? "<f4"
                        : t.type == DataType::kHALF ? "<f2"
                        : t.type == DataType::kINT8 ? "|i1"
                                                    : "<i4";
    std::string shape = "(";
    for (int32_t d = 0; d < t.dims.nbDims; ++d) shape += std::to_string(t.dims.d[d]) + ",";
    shape += ")";
    std::string header =
        "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
    size_t const total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    uint16_t const length = static_cast<uint16_t>(header.size());
    out.write(reinterpret_cast<char const*>(&length), 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<char const*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
}

}  // namespace

IPluginCreatorV3One* findCreator(std::string const& plugin)
{
    return asV3Creator(HarnessRegistry::instance().getCreator(plugin.c_str(), "1", "trt_plugin_kit"));
}

namespace
{
//! What the build phase leaves for the runtime: the plugin deserialized from its fields (and a clone of it,
//! released with it once a clone is attached) and the workspace it asked for.
struct Built
{
    PluginPtr runtimePlugin;
    PluginPtr cloned;
    Capabilities runtimeCaps;
    size_t workspaceBytes{0};
};

//! TensorRT's build phase on `c` (types, shapes, formats, configure, workspace), then the serialize round
//! trip: fields -> bytes -> fields -> createPlugin(kRUNTIME).
Built buildAndSerialize(Case& c, RecordingLogger& logger)
{
    IPluginCreatorV3One* creator = findCreator(c.plugin);
    if (creator == nullptr) failStep("no creator trt_plugin_kit::", c.plugin, " v1 in the registry");
    PluginPtr plugin(creator->createPlugin("layer", c.fields.collection(), TensorRTPhase::kBUILD));
    if (!plugin) failStep("createPlugin(kBUILD) returned null: ", errorsLogged(logger));
    Capabilities caps = checkedCapabilities(plugin.get(), c.plugin);
    int32_t const nbIn = static_cast<int32_t>(c.inputs.size());
    int32_t const nbOut = static_cast<int32_t>(c.outputs.size());
    if (caps.build->getNbOutputs() != nbOut) failStep("getNbOutputs is ", caps.build->getNbOutputs());

    std::vector<DataType> inTypes, outTypes(c.outputs.size());
    for (auto const& s : c.inputs) inTypes.push_back(s.type);
    if (caps.build->getOutputDataTypes(outTypes.data(), nbOut, inTypes.data(), nbIn) != 0)
        failStep("getOutputDataTypes failed: ", errorsLogged(logger));
    for (int32_t o = 0; o < nbOut; ++o)
        if (outTypes[o] != c.outputs[o].type) failStep("output ", o, " type is ", typeName(outTypes[o]));

    checkOutputShapes(caps.build, c.inputs, c.outputs);
    checkFormats(caps.build, c.inputs, c.outputs);
    auto inDyn = dynamicDescs(c.inputs, true);
    auto outDyn = dynamicDescs(c.outputs, true);
    if (caps.build->configurePlugin(inDyn.data(), nbIn, outDyn.data(), nbOut) != 0)
        failStep("configurePlugin failed: ", errorsLogged(logger));
    for (size_t i = 0; i < inDyn.size(); ++i) inDyn[i].desc.dims = c.inputs[i].dims;
    for (size_t i = 0; i < outDyn.size(); ++i) outDyn[i].desc.dims = c.outputs[i].dims;
    Built built;
    built.workspaceBytes = caps.build->getWorkspaceSize(inDyn.data(), nbIn, outDyn.data(), nbOut);

    SerializedFields serialized(caps.runtime->getFieldsToSerialize());
    built.runtimePlugin.reset(
        creator->createPlugin("layer", serialized.collection(), TensorRTPhase::kRUNTIME));
    if (!built.runtimePlugin)
        failStep("createPlugin(kRUNTIME) from serialized fields failed: ", errorsLogged(logger));
    built.runtimeCaps = checkedCapabilities(built.runtimePlugin.get(), c.plugin);
    SerializedFields again(built.runtimeCaps.runtime->getFieldsToSerialize());
    if (again.blob() != serialized.blob()) failStep("serialize round trip changed the fields");
    built.cloned.reset(built.runtimePlugin->clone());
    if (!built.cloned) failStep("clone returned null");
    return built;
}

//! The runtime side of one case on the GPU: the attached plugin, its tensors on the device, the references,
//! and the calls the checks below share.
struct GpuCase
{
    GpuCase(Case& c_, RecordingLogger& logger_, Capabilities attached, size_t workspaceBytes)
        : c(c_),
          logger(logger_),
          caps(attached),
          inDescs(runtimeDescs(c.inputs)),
          outDescs(runtimeDescs(c.outputs)),
          device(c.inputs, c.outputs),
          workspace(workspaceBytes)
    {
    }

    void poison()
    {
        device.poisonOutputs(nullptr);  // NaN / -1 where nothing is written
        cudaOk(cudaDeviceSynchronize(), "sync");
    }
    int32_t enqueue()
    {
        return caps.runtime->enqueue(inDescs.data(), outDescs.data(), device.inPtrs.data(),
                                     device.outPtrs.data(), workspace.get(), stream.get());
    }
    //! Poisons the outputs, enqueues, waits: the outputs as the enqueue left them.
    std::vector<HostTensor> run(std::string const& what)
    {
        poison();
        if (enqueue() != 0) failStep(what, " failed: ", errorsLogged(logger));
        cudaOk(cudaStreamSynchronize(stream.get()), "kernel execution");
        return download();
    }
    std::vector<HostTensor> download()
    {
        std::vector<HostTensor> into;
        for (auto const& s : c.outputs) into.emplace_back(s.type, s.dims);
        for (size_t o = 0; o < into.size(); ++o)
            cudaOk(cudaMemcpy(into[o].bytes.data(), device.out[o]->get(), into[o].bytes.size(),
                              cudaMemcpyDeviceToHost),
                   "download");
        return into;
    }
    //! Each output's error against its reference (within the case's tolerance, or a StepFailure naming
    //! `what`); appends "out0 max rel err ..." to `detail` when given.
    void checkOutputs(std::vector<HostTensor> const& outputs, std::string const& what,
                      std::ostringstream* detail)
    {
        for (size_t o = 0; o < outputs.size(); ++o)
        {
            std::string where;
            double const err = maxError(outputs[o], references[o], where);
            if (detail != nullptr)
            {
                bool const integer =
                    outputs[o].type == DataType::kINT8 || outputs[o].type == DataType::kINT32;
                *detail << (o ? ", " : "") << "out" << o << (integer ? " max diff " : " max rel err ")
                        << std::scientific << err;
            }
            if (!(err <= c.tolerance))
                failStep(what, "output ", o, " error ", err, " > ", c.tolerance, " at ", where);
        }
    }

    Case& c;
    RecordingLogger& logger;
    Capabilities caps;
    std::vector<PluginTensorDesc> inDescs, outDescs;
    DeviceTensors device;
    DeviceMemory workspace;
    Stream stream;
    std::vector<Reference> references;
};

//! Tactics: what TensorRT times at build time. Each one must be correct too; setTactic comes after
//! onShapeChange here (TensorRT does not promise an order), so the plugin must be ready without another.
void checkTactics(GpuCase& g, std::ostringstream& detail)
{
    int32_t const nbTactics = g.caps.build->getNbTactics();
    if (nbTactics <= 0) return;
    std::vector<int32_t> tactics(static_cast<size_t>(nbTactics));
    if (g.caps.build->getValidTactics(tactics.data(), nbTactics) != 0)
        failStep("getValidTactics failed: ", errorsLogged(g.logger));
    for (int32_t tactic : tactics)
    {
        if (g.caps.runtime->setTactic(tactic) != 0)
            failStep("setTactic(", tactic, ") failed: ", errorsLogged(g.logger));
        std::string const what = "tactic " + std::to_string(tactic) + ": ";
        g.checkOutputs(g.run("enqueue with tactic " + std::to_string(tactic)), what, nullptr);
    }
    if (g.caps.runtime->setTactic(0) != 0) failStep("setTactic(0) failed");
    detail << "; " << nbTactics << " tactics correct";
}

//! The same enqueue captured in a CUDA graph (global capture mode: any forbidden call such as a
//! synchronization or an allocation inside enqueue breaks the capture) and replayed twice: the outputs must
//! be the enqueue's, bit for bit.
void checkGraphReplay(GpuCase& g, std::vector<HostTensor> const& outputs, std::ostringstream& detail)
{
    g.poison();
    CapturedGraph graph(g.stream.get());
    int32_t const captured = g.enqueue();
    cudaError_t const endStatus = graph.finish();
    if (captured != 0 || endStatus != cudaSuccess)
    {
        failStep("enqueue is not capturable in a CUDA graph: ", cudaGetErrorString(endStatus), " ",
                 errorsLogged(g.logger));
    }
    cudaError_t launch = graph.launch();
    if (launch == cudaSuccess) launch = graph.launch();  // replay twice
    if (launch == cudaSuccess) launch = cudaStreamSynchronize(g.stream.get());
    cudaOk(launch, "graph replay");
    std::vector<HostTensor> const replayed = g.download();
    for (size_t o = 0; o < outputs.size(); ++o)
        if (replayed[o].bytes != outputs[o].bytes)
            failStep("graph replay of output ", o, " differs from enqueue");
    detail << "; graph replay identical";
}

//! The case's inputs and outputs as .npy files and its description as JSON, for the NumPy cross-check.
void dumpCase(Case const& c, std::string const& dumpDir, int caseIndex, std::vector<HostTensor> const& inputs,
              std::vector<HostTensor> const& outputs)
{
    std::string const base = dumpDir + "/case" + std::to_string(caseIndex);
    for (size_t i = 0; i < inputs.size(); ++i) writeNpy(base + "_in" + std::to_string(i) + ".npy", inputs[i]);
    for (size_t o = 0; o < outputs.size(); ++o)
        writeNpy(base + "_out" + std::to_string(o) + ".npy", outputs[o]);
    std::ofstream meta(base + ".json");
    meta << "{\"plugin\": \"" << c.plugin << "\", \"label\": \"" << c.label
         << "\", \"tolerance\": " << c.tolerance << ", \"inputs\": " << inputs.size()
         << ", \"outputs\": " << outputs.size() << ", \"fields\": " << c.fields.toJson() << "}\n";
}

//! The runtime phase on the GPU: attach a clone to a context (the objects it came from released first), the
//! concrete shapes, an enqueue checked against the references, every tactic, graph replay; the detail line.
std::string runOnGpu(Case& c, Built& built, RunOptions const& options, RecordingLogger& logger, int caseIndex)
{
    HarnessResourceContext context;
    PluginPtr attached(built.runtimeCaps.runtime->attachToContext(&context));
    if (!attached) failStep("attachToContext returned null: ", errorsLogged(logger));
    built.runtimePlugin.reset();
    built.cloned.reset();
    GpuCase g(c, logger, checkedCapabilities(attached.get(), c.plugin), built.workspaceBytes);
    int32_t const nbIn = static_cast<int32_t>(c.inputs.size());
    int32_t const nbOut = static_cast<int32_t>(c.outputs.size());
    if (g.caps.runtime->onShapeChange(g.inDescs.data(), nbIn, g.outDescs.data(), nbOut) != 0)
        failStep("onShapeChange failed: ", errorsLogged(logger));

    std::mt19937 rng(1234U + static_cast<unsigned>(caseIndex));
    std::vector<HostTensor> inputs;
    for (auto const& s : c.inputs) inputs.emplace_back(s.type, s.dims);
    g.references.resize(c.outputs.size());
    c.generate(inputs, g.references, rng);
    g.device.upload(inputs);

    std::vector<HostTensor> const outputs = g.run("enqueue");
    std::ostringstream detail;
    detail.precision(2);
    g.checkOutputs(outputs, "", &detail);
    checkTactics(g, detail);
    checkGraphReplay(g, outputs, detail);
    if (!options.dumpDir.empty() && c.dump) dumpCase(c, options.dumpDir, caseIndex, inputs, outputs);
    return detail.str();
}
}  // namespace

Result runCase(Case& c, RunOptions const& options, RecordingLogger& logger, int caseIndex)
{
    Result result;
    try
    {
        logger.take();
        Built built = buildAndSerialize(c, logger);
        if (!options.gpu)
        {
            result.pass = true;
            result.detail = "build-phase calls and serialize round trip (no GPU)";
            return result;
        }
        result.detail = runOnGpu(c, built, options, logger, caseIndex);
        result.pass = true;
    }
    catch (std::exception const& e)
    {
        result.pass = false;
        result.detail = e.what();
        cudaGetLastError();  // Don't let one failed case poison the next.
    }
    return result;
}

Result runReject(RejectCase& r, RecordingLogger& logger)
{
    Result result;
    logger.take();
    IPluginCreatorV3One* creator = findCreator(r.plugin);
    if (creator == nullptr)
    {
        result.detail = "no creator";
        return result;
    }
    for (TensorRTPhase phase : {TensorRTPhase::kBUILD, TensorRTPhase::kRUNTIME})
    {
        PluginPtr plugin(creator->createPlugin("layer", r.fields.collection(), phase));
        std::string const errors = errorsLogged(logger);
        if (plugin)
        {
            result.detail = std::string("createPlugin accepted the fields in phase ") +
                            (phase == TensorRTPhase::kBUILD ? "kBUILD" : "kRUNTIME");
            return result;
        }
        if (errors.find(r.expect) == std::string::npos)
        {
            result.detail = "logged error does not mention '" + r.expect + "': " + errors;
            return result;
        }
        result.detail = errors.substr(0, errors.size() > 3 ? errors.size() - 3 : 0);
    }
    result.pass = true;
    return result;
}

Result runShapeError(ShapeErrorCase& s, RecordingLogger& logger)
{
    Result result;
    try
    {
        logger.take();
        IPluginCreatorV3One* creator = findCreator(s.plugin);
        if (creator == nullptr) failStep("no creator");
        PluginPtr plugin(creator->createPlugin("layer", s.fields.collection(), TensorRTPhase::kBUILD));
        if (!plugin) failStep("createPlugin rejected good fields: ", errorsLogged(logger));
        Capabilities caps = checkedCapabilities(plugin.get(), s.plugin);
        int32_t const nbIn = static_cast<int32_t>(s.inputs.size());
        int32_t const nbOut = static_cast<int32_t>(s.outputs.size());
        // getOutputShapes with constant dims, configurePlugin, onShapeChange: at least the first two must
        // fail, and none may crash.
        HarnessExprBuilder builder;
        std::vector<DimsExprs> in(s.inputs.size()), out(s.outputs.size());
        for (int32_t i = 0; i < nbIn; ++i)
        {
            in[i].nbDims = s.inputs[i].dims.nbDims;
            for (int32_t d = 0; d < in[i].nbDims; ++d) in[i].d[d] = builder.constant(s.inputs[i].dims.d[d]);
        }
        int32_t const shapes =
            caps.build->getOutputShapes(in.data(), nbIn, nullptr, 0, out.data(), nbOut, builder);
        auto inDyn = dynamicDescs(s.inputs, true);
        auto outDyn = dynamicDescs(s.outputs, true);
        for (size_t i = 0; i < inDyn.size(); ++i)
            inDyn[i].desc.dims = inDyn[i].min = inDyn[i].max = s.inputs[i].dims;
        int32_t const configured = caps.build->configurePlugin(inDyn.data(), nbIn, outDyn.data(), nbOut);
        auto inRt = runtimeDescs(s.inputs);
        auto outRt = runtimeDescs(s.outputs);
        int32_t const changed = caps.runtime->onShapeChange(inRt.data(), nbIn, outRt.data(), nbOut);
        std::string const errors = errorsLogged(logger);
        if (shapes == 0 || configured == 0 || changed == 0)
            failStep("not reported by every stage (getOutputShapes ", shapes, ", configurePlugin ",
                     configured, ", onShapeChange ", changed, ")");
        if (errors.find(s.expect) == std::string::npos)
            failStep("logged errors do not mention '", s.expect, "': ", errors);
        result.pass = true;
        result.detail = errors.substr(0, std::min<size_t>(errors.size(), 160));
    }
    catch (std::exception const& e)
    {
        result.detail = e.what();
    }
    return result;
}

}  // namespace harness
