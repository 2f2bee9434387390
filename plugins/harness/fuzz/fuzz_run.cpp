// plugin_stress fuzz: generated field collections for every creator in kBUILD and kRUNTIME, then the calls
// TensorRT makes on whatever was accepted (serialize round trip, build calls, random shapes). What is valid
// comes from the plugins' specs (plugin_specs.h): collections the spec allows must be accepted, collections
// that break one rule of the spec must be rejected with an error naming the field, and accepted plugins must
// build with the spec's plausible shape.
//
// Every collection is honest about its memory: a field's data holds at least length * element-size bytes
// (lengths above the library's kMaxFieldElements point into a read-only mapping that large). A collection
// that lies about its lengths makes the plugin read past the buffer, which no plugin can detect.
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

#include "conformance/runner.h"
#include "fuzz/fuzz.h"

namespace stress
{
namespace fuzz
{
namespace
{
uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

uint64_t iterationSeed(uint64_t seed, std::string const& plugin, int64_t iteration)
{
    uint64_t h = 1469598103934665603ULL;  // FNV-1a of the plugin name
    for (char c : plugin)
    {
        h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
    }
    return splitmix(splitmix(seed) ^ splitmix(h) ^
                    splitmix(static_cast<uint64_t>(iteration) + 0x51ED2701ULL));
}

int32_t plausibleRankOf(std::string const& plugin)
{
    return static_cast<int32_t>(specOf(plugin).shapeInputs.at(0).size());
}

struct PluginStats
{
    int64_t collections{0};
    int64_t accepted{0};
    int64_t rejected{0};
    int64_t roundTrips{0};
    int64_t buildChecks{0};
    int64_t shapeTrials{0};
    int64_t shapeErrors{0};
    int64_t badPhases{0};
    int64_t specValid{0};       // collections the spec allows (each must be accepted)
    int64_t specViolations{0};  // collections breaking one rule of the spec (each must be rejected)
    int64_t failures{0};
    std::vector<std::string> messages;
};

char const* phaseName(TensorRTPhase phase)
{
    return phase == TensorRTPhase::kBUILD     ? "kBUILD"
           : phase == TensorRTPhase::kRUNTIME ? "kRUNTIME"
                                              : "invalid";
}

//! One generated collection through both phases; failures are appended to stats.messages.
void runIteration(std::string const& plugin, IPluginCreatorV3One* creator, int64_t iteration,
                  FuzzOptions const& options, std::vector<DeclaredField> const& declared,
                  std::vector<FuzzCollection> const& corpus, harness::RecordingLogger& logger,
                  PluginStats& stats)
{
    Rng rng(iterationSeed(options.seed, plugin, iteration));
    std::string violated;
    FuzzCollection collection = generate(plugin, rng, declared, corpus, violated);
    bool const specValid = collection.origin == "valid";
    stats.specValid += specValid ? 1 : 0;
    stats.specViolations += violated.empty() ? 0 : 1;
    PluginFieldCollection const* fc = collection.build();
    std::string const where =
        plugin + " seed=" + std::to_string(options.seed) + " iteration=" + std::to_string(iteration);
    bool const verbose = options.verbose || options.onlyIteration >= 0;
    if (verbose) std::printf("  %s: %s\n", where.c_str(), collection.describe().c_str());
    ++stats.collections;
    auto failure = [&](std::string const& phase, std::string const& what)
    {
        ++stats.failures;
        if (stats.messages.size() < 20)
            stats.messages.push_back(where + " " + phase + ": " + what + " | fields " +
                                     collection.describe().substr(0, 600));
    };

    std::vector<TensorRTPhase> phases{TensorRTPhase::kBUILD, TensorRTPhase::kRUNTIME};
    if (rng.chance(1.0 / 64)) phases.push_back(static_cast<TensorRTPhase>(rng.chance(0.5) ? 2 : -1));
    for (TensorRTPhase phase : phases)
    {
        setContext("fuzz " + where + " createPlugin(" + phaseName(phase) + ")");
        logger.take();
        PluginPtr plugin_(creator->createPlugin("fuzz", fc, phase));
        std::string const errors = errorsLogged(logger);
        if (verbose)
            std::printf("    %s: %s%s\n", phaseName(phase),
                        plugin_ ? "accepted" : "rejected: ", errors.c_str());
        bool const validPhase = phase == TensorRTPhase::kBUILD || phase == TensorRTPhase::kRUNTIME;
        if (!validPhase)
        {
            ++stats.badPhases;
            if (plugin_)
                failure(phaseName(phase), "createPlugin accepted an unknown phase value");
            else if (errors.empty())
                failure(phaseName(phase), "unknown phase rejected without a logged error");
            continue;
        }
        if (!plugin_)
        {
            ++stats.rejected;
            if (errors.empty())
                failure(phaseName(phase), "createPlugin returned nullptr without logging an error");
            else if (errors.find(plugin) == std::string::npos)
                failure(phaseName(phase), "the logged error does not name the plugin: " + errors);
            else if (specValid)
                failure(phaseName(phase), "rejected fields its spec allows: " + errors);
            else if (!violated.empty() && errors.find(violated) == std::string::npos)
                failure(phaseName(phase), "the error does not name the field '" + violated + "': " + errors);
            continue;
        }
        ++stats.accepted;
        if (!violated.empty())
        {
            failure(phaseName(phase), "accepted fields its spec forbids (" + collection.origin + ")");
            continue;
        }
        if (!errors.empty())
            failure(phaseName(phase), "createPlugin succeeded but logged an error: " + errors);
        std::string problem;
        Capabilities caps = capabilitiesOf(plugin_.get(), plugin, problem);
        if (!problem.empty())
        {
            failure(phaseName(phase), problem);
            continue;
        }
        int32_t const nbOutputs = caps.build->getNbOutputs();
        int32_t const nbInputs = static_cast<int32_t>(specOf(plugin).inputTypes.size());
        if (nbOutputs < 1 || nbOutputs > kMaxArray)
        {
            failure(phaseName(phase), "getNbOutputs is " + std::to_string(nbOutputs));
            continue;
        }

        // Serialize round trip, as an engine plan stores the fields and TensorRT recreates the plugin.
        setContext("fuzz " + where + " " + phaseName(phase) + " serialize round trip");
        PluginPtr runtimePlugin;
        Capabilities runtimeCaps;
        try
        {
            harness::SerializedFields serialized(caps.runtime->getFieldsToSerialize());
            runtimePlugin.reset(
                creator->createPlugin("fuzz", serialized.collection(), TensorRTPhase::kRUNTIME));
            if (!runtimePlugin)
            {
                failure(phaseName(phase),
                        "createPlugin(kRUNTIME) rejects the plugin's own serialized fields: " +
                            errorsLogged(logger));
                continue;
            }
            runtimeCaps = capabilitiesOf(runtimePlugin.get(), plugin, problem);
            if (!problem.empty())
            {
                failure(phaseName(phase), "recreated plugin: " + problem);
                continue;
            }
            harness::SerializedFields again(runtimeCaps.runtime->getFieldsToSerialize());
            if (again.blob() != serialized.blob())
            {
                failure(phaseName(phase), "serialize round trip changed the fields");
                continue;
            }
            PluginPtr cloned(runtimePlugin->clone());
            if (!cloned)
            {
                failure(phaseName(phase), "clone returned null: " + errorsLogged(logger));
                continue;
            }
            ++stats.roundTrips;

            if (options.buildSampleEvery > 0 &&
                rng.below(static_cast<uint64_t>(options.buildSampleEvery)) == 0)
            {
                setContext("fuzz " + where + " " + phaseName(phase) + " build calls with a plausible shape");
                ReadBack const fields = readBack(runtimeCaps.runtime->getFieldsToSerialize());
                std::optional<Plausible> plausible = plausibleShapes(plugin, fields, problem);
                if (!plausible)
                {
                    failure(phaseName(phase), "no plausible shape: " + problem);
                    continue;
                }
                std::string const buildProblem = checkBuildCalls(caps.build, *plausible, logger);
                ++stats.buildChecks;
                if (!buildProblem.empty()) failure(phaseName(phase), buildProblem);
            }
        }
        catch (std::exception const& e)
        {
            failure(phaseName(phase),
                    std::string("getFieldsToSerialize produced unusable fields: ") + e.what());
            continue;
        }

        for (int32_t t = 0; t < options.shapeTrials; ++t)
        {
            setContext("fuzz " + where + " " + phaseName(phase) + " random shapes, trial " +
                       std::to_string(t));
            ++stats.shapeTrials;
            std::string const trouble = shapeTrial(caps, runtimeCaps, nbInputs, nbOutputs,
                                                   plausibleRankOf(plugin), rng, logger, stats.shapeErrors);
            if (!trouble.empty()) failure(phaseName(phase), "random shapes: " + trouble);
        }
    }
    logger.take();
}
}  // namespace
}  // namespace fuzz

void runFuzz(FuzzOptions const& options, harness::RecordingLogger& logger, Counts& counts)
{
    using namespace fuzz;
    HugeRegion const& region = hugeRegion();
    std::printf(
        "fuzz: seed %llu, %lld collections per creator, each in kBUILD and kRUNTIME; lengths above %d "
        "backed by a %.0f GiB read-only mapping\n",
        static_cast<unsigned long long>(options.seed), static_cast<long long>(options.iterations),
        kLengthLimit, static_cast<double>(region.bytes) / (1 << 30));
    std::fflush(stdout);
    for (auto const& plugin : pluginNames())
    {
        if (!options.plugin.empty() && options.plugin != plugin) continue;
        IPluginCreatorV3One* creator = harness::findCreator(plugin);
        if (creator == nullptr)
        {
            counts.record(false, "fuzz " + plugin, "no creator in the registry");
            continue;
        }
        std::vector<DeclaredField> const declared = declaredFields(creator);
        std::vector<FuzzCollection> const corpus = corpusFor(plugin);
        PluginStats stats;
        int64_t const first = options.onlyIteration >= 0 ? options.onlyIteration : 0;
        int64_t const last = options.onlyIteration >= 0 ? options.onlyIteration + 1 : options.iterations;
        for (int64_t i = first; i < last; ++i)
        {
            runIteration(plugin, creator, i, options, declared, corpus, logger, stats);
        }
        for (auto const& m : stats.messages)
        {
            counts.record(false, "fuzz " + m, "");
        }
        std::ostringstream detail;
        detail << stats.collections << " collections (" << corpus.size()
               << " suite seeds) x 2 phases: " << stats.accepted << " accepted, " << stats.rejected
               << " rejected, each with a logged error; " << stats.roundTrips << " serialize round trips, "
               << stats.buildChecks << " build-call checks with a plausible shape, " << stats.shapeTrials
               << " random-shape trials (" << stats.shapeErrors << " error codes, each logged), "
               << stats.badPhases << " unknown phases; spec: " << stats.specValid << " valid (all accepted), "
               << stats.specViolations << " breaking one rule (all rejected, naming the field)";
        if (stats.failures > 0) detail << "; " << stats.failures << " FAILURES (first ones above)";
        counts.record(stats.failures == 0, "fuzz " + plugin, detail.str());
    }
}

}  // namespace stress
