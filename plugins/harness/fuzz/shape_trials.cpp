// plugin_stress fuzz: random shapes for accepted plugins.
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
int64_t randomDim(Rng& rng)
{
    static std::vector<int64_t> const values{0,
                                             1,
                                             2,
                                             3,
                                             4,
                                             5,
                                             7,
                                             8,
                                             16,
                                             28,
                                             33,
                                             64,
                                             500,
                                             4096,
                                             65535,
                                             65536,
                                             -1,
                                             -2,
                                             -7,
                                             -65536,
                                             std::numeric_limits<int32_t>::max(),
                                             int64_t{std::numeric_limits<int32_t>::max()} + 1,
                                             int64_t{1} << 32,
                                             int64_t{1} << 40};
    return rng.chance(0.4) ? rng.range(1, 8) : rng.pick(values);
}

//! Random dims for one tensor. Their product stays below 2^62: no tensor has more elements, and TensorRT
//! rejects such shapes long before a plugin sees them.
Dims randomDims(Rng& rng, int32_t plausibleRank)
{
    Dims dims{};
    double const p = rng.uniform();
    dims.nbDims = p < 0.6 ? plausibleRank : p < 0.95 ? static_cast<int32_t>(rng.range(0, 8)) : -1;
    long double product = 1;
    for (int32_t i = 0; i < Dims::MAX_DIMS; ++i)
    {
        int64_t v = randomDim(rng);
        if (product * std::fabs(static_cast<long double>(v)) >= 0x1.0p62L) v = 1;
        product *= std::max<long double>(1, std::fabs(static_cast<long double>(v)));
        dims.d[i] = v;
    }
    return dims;
}

DataType randomType(Rng& rng)
{
    double const p = rng.uniform();
    if (p < 0.5) return DataType::kFLOAT;
    if (p < 0.6) return rng.chance(0.5) ? DataType::kHALF : DataType::kBF16;
    if (p < 0.7) return DataType::kINT8;
    if (p < 0.95) return static_cast<DataType>(rng.range(0, 10));
    return static_cast<DataType>(99);
}

int32_t randomCount(Rng& rng, int32_t correct)
{
    return rng.chance(0.8) ? correct : static_cast<int32_t>(rng.range(0, 4));
}

//! getOutputDataTypes, getOutputShapes, supportsFormatCombination, configurePlugin, getWorkspaceSize (build
//! object) and onShapeChange (runtime object) with random counts, ranks, dims and types: each returns success
//! or an error code with a logged error; nothing crashes. Returns the problems found.
std::string shapeTrial(Capabilities const& build, Capabilities const& runtime, int32_t nbInputs,
                       int32_t nbOutputs, int32_t plausibleRank, Rng& rng, harness::RecordingLogger& logger,
                       int64_t& errorsReported)
{
    std::string problems;
    auto expectLogged = [&](int32_t status, char const* call)
    {
        std::string const errors = errorsLogged(logger);
        if (status != 0)
        {
            ++errorsReported;
            if (errors.empty())
                problems +=
                    std::string(call) + " returned " + std::to_string(status) + " without logging an error; ";
        }
    };
    int32_t const nbIn = randomCount(rng, nbInputs);
    int32_t const nbOut = randomCount(rng, nbOutputs);
    bool const nullArrays = rng.chance(0.03);

    std::array<DataType, kMaxArray> inTypes{}, outTypes{};
    for (auto& t : inTypes) t = randomType(rng);
    logger.take();
    expectLogged(
        build.build->getOutputDataTypes(nullArrays ? nullptr : outTypes.data(), nbOut, inTypes.data(), nbIn),
        "getOutputDataTypes");

    harness::HarnessExprBuilder builder;
    std::array<DimsExprs, kMaxArray> in{}, out{};
    for (int32_t i = 0; i < kMaxArray; ++i)
    {
        Dims const dims = randomDims(rng, plausibleRank);
        in[i].nbDims = dims.nbDims;
        for (int32_t d = 0; d < Dims::MAX_DIMS; ++d)
        {
            in[i].d[d] = rng.chance(0.25) ? builder.symbol(i * 8 + d) : builder.constant(dims.d[d]);
        }
    }
    int32_t const shapesStatus = build.build->getOutputShapes(nullArrays ? nullptr : in.data(), nbIn, nullptr,
                                                              0, out.data(), nbOut, builder);
    expectLogged(shapesStatus, "getOutputShapes");
    if (shapesStatus == 0)
    {
        for (int32_t o = 0; o < nbOut; ++o)
        {
            bool ok = out[o].nbDims >= 0 && out[o].nbDims <= Dims::MAX_DIMS;
            for (int32_t d = 0; ok && d < out[o].nbDims; ++d) ok = out[o].d[d] != nullptr;
            if (!ok)
                problems += "getOutputShapes succeeded with a malformed output " + std::to_string(o) + "; ";
        }
    }

    std::array<DynamicPluginTensorDesc, kMaxArray> dyn{};
    for (auto& d : dyn)
    {
        d.desc.type = randomType(rng);
        d.desc.format =
            rng.chance(0.85) ? TensorFormat::kLINEAR : static_cast<TensorFormat>(rng.range(0, 15));
        d.desc.scale = rng.chance(0.9) ? 1.F : specialFloat(rng);
        d.desc.dims = randomDims(rng, plausibleRank);
        d.min = rng.chance(0.5) ? d.desc.dims : randomDims(rng, plausibleRank);
        d.opt = d.desc.dims;
        d.max = rng.chance(0.5) ? d.desc.dims : randomDims(rng, plausibleRank);
    }
    int32_t const pos = static_cast<int32_t>(rng.range(-1, nbIn + nbOut));
    (void)build.build->supportsFormatCombination(pos, nullArrays ? nullptr : dyn.data(), nbIn, nbOut);
    logger.take();  // a rejected combination may or may not log: both are fine
    expectLogged(build.build->configurePlugin(nullArrays ? nullptr : dyn.data(), nbIn,
                                              nullArrays ? nullptr : dyn.data() + nbIn, nbOut),
                 "configurePlugin");
    (void)build.build->getWorkspaceSize(dyn.data(), nbIn, dyn.data() + nbIn, nbOut);
    logger.take();

    std::array<PluginTensorDesc, kMaxArray> rt{};
    for (auto& d : rt)
    {
        d.type = randomType(rng);
        d.format = rng.chance(0.9) ? TensorFormat::kLINEAR : static_cast<TensorFormat>(rng.range(0, 15));
        d.scale = 1.F;
        d.dims = randomDims(rng, plausibleRank);
    }
    expectLogged(
        runtime.runtime->onShapeChange(nullArrays ? nullptr : rt.data(), nbIn, rt.data() + nbIn, nbOut),
        "onShapeChange");

    // Tactics: the count, the list with right and wrong sizes (the buffer always as large as claimed), and
    // setTactic with valid and invalid ids on the runtime object after the random shape change.
    int32_t const nbTactics = build.build->getNbTactics();
    logger.take();
    if (nbTactics < 0 || nbTactics > 1024)
    {
        problems += "getNbTactics returned " + std::to_string(nbTactics) + "; ";
        return problems;
    }
    int32_t const asked = rng.chance(0.7) ? nbTactics : static_cast<int32_t>(rng.range(0, nbTactics + 2));
    std::vector<int32_t> tactics(static_cast<size_t>(std::max(asked, 1)), -7);
    int32_t const listed = build.build->getValidTactics(tactics.data(), asked);
    expectLogged(listed, "getValidTactics");
    std::vector<int64_t> candidates{0, -1, nbTactics + 1, std::numeric_limits<int32_t>::max(),
                                    std::numeric_limits<int32_t>::min()};
    if (listed == 0)
    {
        for (int32_t i = 0; i < asked; ++i)
        {
            if (tactics[i] == -7)
                problems += "getValidTactics succeeded without filling entry " + std::to_string(i) + "; ";
            candidates.push_back(tactics[i]);
        }
    }
    expectLogged(runtime.runtime->setTactic(static_cast<int32_t>(rng.pick(candidates))), "setTactic");
    return problems;
}

}  // namespace stress::fuzz
