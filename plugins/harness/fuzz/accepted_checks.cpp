// plugin_stress fuzz: what an accepted plugin must survive.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "fuzz/fuzz.h"

namespace stress::fuzz
{
ReadBack readBack(PluginFieldCollection const* fc)
{
    ReadBack r;
    for (int32_t i = 0; fc != nullptr && i < fc->nbFields; ++i)
    {
        PluginField const& f = fc->fields[i];
        std::string const name = f.name;
        if (f.type == PluginFieldType::kINT32)
        {
            auto const* v = static_cast<int32_t const*>(f.data);
            r.ints[name].assign(v, v + f.length);
        }
        else if (f.type == PluginFieldType::kFLOAT32)
        {
            auto const* v = static_cast<float const*>(f.data);
            r.floats[name].assign(v, v + f.length);
        }
        else if (f.type == PluginFieldType::kCHAR)
        {
            auto const* v = static_cast<char const*>(f.data);
            r.strings[name] = std::string(v, strnlen(v, static_cast<size_t>(f.length)));
        }
    }
    return r;
}

//! The serialized integer fields, for the spec's shape rules.
class ReadBackValues : public harness::FieldValues
{
public:
    explicit ReadBackValues(ReadBack const& fields) : mFields(fields) {}
    int64_t value(std::string const& field, int64_t index) const override
    {
        auto const& values = mFields.ints.at(field);
        return values.at(static_cast<size_t>(index));
    }
    int64_t length(std::string const& field) const override
    {
        if (mFields.ints.count(field)) return static_cast<int64_t>(mFields.ints.at(field).size());
        if (mFields.floats.count(field)) return static_cast<int64_t>(mFields.floats.at(field).size());
        return static_cast<int64_t>(mFields.strings.at(field).size());
    }

private:
    ReadBack const& mFields;
};

//! Shapes every plugin accepting these (serialized) fields must build with, and the outputs it must report:
//! the spec's `shapes`, evaluated on the fields.
std::optional<Plausible> plausibleShapes(std::string const& plugin, ReadBack const& f, std::string& problem)
{
    harness::PluginSpec const& spec = specOf(plugin);
    ReadBackValues const values(f);
    auto evaluate = [&](std::vector<harness::DimRule> const& rules)
    {
        std::vector<int64_t> dims;
        for (auto const& rule : rules) dims.push_back(rule(values));
        return harness::TensorSpec{DataType::kFLOAT, harness::makeDims(dims)};
    };
    Plausible p;
    try
    {
        for (auto const& rules : spec.shapeInputs) p.inputs.push_back(evaluate(rules));
        for (auto const& rules : spec.shapeOutputs) p.outputs.push_back(evaluate(rules));
    }
    catch (std::out_of_range const&)
    {
        problem = "the serialized fields lack one the spec's shapes use";
        return std::nullopt;
    }
    for (auto const& spec_ : p.inputs)
    {
        for (int32_t d = 0; d < spec_.dims.nbDims; ++d)
        {
            if (spec_.dims.d[d] < 1)
            {
                problem = "the spec's shapes give a non-positive input dimension for these fields";
                return std::nullopt;
            }
        }
    }
    return p;
}

//! TensorRT's build calls with plausible shapes: must all succeed and report the expected outputs.
std::string checkBuildCalls(IPluginV3OneBuild* build, Plausible const& p, harness::RecordingLogger& logger)
{
    int32_t const nbIn = static_cast<int32_t>(p.inputs.size());
    int32_t const nbOut = static_cast<int32_t>(p.outputs.size());
    std::vector<DataType> inTypes, outTypes(p.outputs.size());
    for (auto const& s : p.inputs) inTypes.push_back(s.type);
    if (build->getOutputDataTypes(outTypes.data(), nbOut, inTypes.data(), nbIn) != 0)
        return "getOutputDataTypes failed: " + errorsLogged(logger);
    harness::HarnessExprBuilder builder;
    std::vector<DimsExprs> in(p.inputs.size()), out(p.outputs.size());
    for (int32_t i = 0; i < nbIn; ++i)
    {
        in[i].nbDims = p.inputs[i].dims.nbDims;
        for (int32_t d = 0; d < in[i].nbDims; ++d) in[i].d[d] = builder.constant(p.inputs[i].dims.d[d]);
    }
    if (build->getOutputShapes(in.data(), nbIn, nullptr, 0, out.data(), nbOut, builder) != 0)
        return "getOutputShapes failed for " + harness::toString(p.inputs[0].dims) + ": " +
               errorsLogged(logger);
    for (int32_t o = 0; o < nbOut; ++o)
    {
        Dims got{};
        got.nbDims = out[o].nbDims;
        for (int32_t d = 0; d < got.nbDims; ++d)
        {
            if (out[o].d[d] == nullptr || !out[o].d[d]->isConstant())
                return "getOutputShapes: non-constant output dim";
            got.d[d] = out[o].d[d]->getConstantValue();
        }
        if (harness::toString(got) != harness::toString(p.outputs[o].dims))
            return "getOutputShapes: output " + std::to_string(o) + " is " + harness::toString(got) +
                   ", expected " + harness::toString(p.outputs[o].dims) + " for input " +
                   harness::toString(p.inputs[0].dims);
    }
    std::vector<harness::TensorSpec> all(p.inputs);
    all.insert(all.end(), p.outputs.begin(), p.outputs.end());
    auto descs = dynamicDescs(all);
    for (int32_t pos = 0; pos < nbIn + nbOut; ++pos)
    {
        if (!build->supportsFormatCombination(pos, descs.data(), nbIn, nbOut))
            return "supportsFormatCombination rejects fp32 linear at position " + std::to_string(pos);
    }
    auto inDyn = dynamicDescs(p.inputs);
    auto outDyn = dynamicDescs(p.outputs);
    if (build->configurePlugin(inDyn.data(), nbIn, outDyn.data(), nbOut) != 0)
        return "configurePlugin failed: " + errorsLogged(logger);
    (void)build->getWorkspaceSize(inDyn.data(), nbIn, outDyn.data(), nbOut);
    return {};
}

}  // namespace stress::fuzz
