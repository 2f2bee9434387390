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

//! One generated collection through both phases (and, 1 in 64, an unknown phase value); failures are
//! appended to stats.messages. Its steps, per phase: createPlugin and the verdict on it, the serialize round
//! trip (with build calls on a plausible shape for 1 in buildSampleEvery), then random shapes.
class Iteration
{
public:
    Iteration(std::string const& plugin, IPluginCreatorV3One* creator, int64_t iteration,
              FuzzOptions const& options, harness::RecordingLogger& logger, PluginStats& stats)
        : mPlugin(plugin),
          mCreator(creator),
          mOptions(options),
          mLogger(logger),
          mStats(stats),
          mRng(iterationSeed(options.seed, plugin, iteration)),
          mWhere(plugin + " seed=" + std::to_string(options.seed) +
                 " iteration=" + std::to_string(iteration)),
          mVerbose(options.verbose || options.onlyIteration >= 0)
    {
    }

    void run(std::vector<DeclaredField> const& declared, std::vector<FuzzCollection> const& corpus)
    {
        mCollection = generate(mPlugin, mRng, declared, corpus, mViolated);
        mSpecValid = mCollection.origin == "valid";
        mStats.specValid += mSpecValid ? 1 : 0;
        mStats.specViolations += mViolated.empty() ? 0 : 1;
        PluginFieldCollection const* fc = mCollection.build();
        if (mVerbose) std::printf("  %s: %s\n", mWhere.c_str(), mCollection.describe().c_str());
        ++mStats.collections;

        std::vector<TensorRTPhase> phases{TensorRTPhase::kBUILD, TensorRTPhase::kRUNTIME};
        if (mRng.chance(1.0 / 64)) phases.push_back(static_cast<TensorRTPhase>(mRng.chance(0.5) ? 2 : -1));
        for (TensorRTPhase phase : phases) runPhase(phase, fc);
        mLogger.take();
    }

private:
    void failure(TensorRTPhase phase, std::string const& what)
    {
        ++mStats.failures;
        if (mStats.messages.size() < 20)
            mStats.messages.push_back(mWhere + " " + phaseName(phase) + ": " + what + " | fields " +
                                      mCollection.describe().substr(0, 600));
    }

    void runPhase(TensorRTPhase phase, PluginFieldCollection const* fc)
    {
        setContext("fuzz " + mWhere + " createPlugin(" + phaseName(phase) + ")");
        mLogger.take();
        PluginPtr plugin(mCreator->createPlugin("fuzz", fc, phase));
        if (!judgeCreation(phase, plugin.get())) return;
        std::string problem;
        Capabilities caps = capabilitiesOf(plugin.get(), mPlugin, problem);
        if (!problem.empty()) return failure(phase, problem);
        int32_t const nbOutputs = caps.build->getNbOutputs();
        int32_t const nbInputs = static_cast<int32_t>(specOf(mPlugin).inputTypes.size());
        if (nbOutputs < 1 || nbOutputs > kMaxArray)
            return failure(phase, "getNbOutputs is " + std::to_string(nbOutputs));
        PluginPtr runtimePlugin;  // keeps runtimeCaps' interfaces alive through the shape trials
        Capabilities runtimeCaps;
        if (!roundTrip(phase, caps, runtimePlugin, runtimeCaps)) return;
        for (int32_t t = 0; t < mOptions.shapeTrials; ++t)
        {
            setContext("fuzz " + mWhere + " " + phaseName(phase) + " random shapes, trial " +
                       std::to_string(t));
            ++mStats.shapeTrials;
            std::string const trouble =
                shapeTrial(caps, runtimeCaps, nbInputs, nbOutputs, plausibleRankOf(mPlugin), mRng, mLogger,
                           mStats.shapeErrors);
            if (!trouble.empty()) failure(phase, "random shapes: " + trouble);
        }
    }

    //! The verdict on createPlugin's answer against the spec; true when the plugin goes on to the next steps.
    bool judgeCreation(TensorRTPhase phase, IPluginV3* plugin)
    {
        std::string const errors = errorsLogged(mLogger);
        if (mVerbose)
            std::printf("    %s: %s%s\n", phaseName(phase),
                        plugin ? "accepted" : "rejected: ", errors.c_str());
        if (phase != TensorRTPhase::kBUILD && phase != TensorRTPhase::kRUNTIME)
        {
            ++mStats.badPhases;
            if (plugin)
                failure(phase, "createPlugin accepted an unknown phase value");
            else if (errors.empty())
                failure(phase, "unknown phase rejected without a logged error");
            return false;
        }
        if (!plugin)
        {
            ++mStats.rejected;
            if (errors.empty())
                failure(phase, "createPlugin returned nullptr without logging an error");
            else if (errors.find(mPlugin) == std::string::npos)
                failure(phase, "the logged error does not name the plugin: " + errors);
            else if (mSpecValid)
                failure(phase, "rejected fields its spec allows: " + errors);
            else if (!mViolated.empty() && errors.find(mViolated) == std::string::npos)
                failure(phase, "the error does not name the field '" + mViolated + "': " + errors);
            return false;
        }
        ++mStats.accepted;
        if (!mViolated.empty())
        {
            failure(phase, "accepted fields its spec forbids (" + mCollection.origin + ")");
            return false;
        }
        if (!errors.empty()) failure(phase, "createPlugin succeeded but logged an error: " + errors);
        return true;
    }

    //! Serialize round trip, as an engine plan stores the fields and TensorRT recreates the plugin; then, for
    //! a sample, the build calls on a plausible shape. True when the random-shape trials may follow.
    bool roundTrip(TensorRTPhase phase, Capabilities const& caps, PluginPtr& runtimePlugin,
                   Capabilities& runtimeCaps)
    {
        setContext("fuzz " + mWhere + " " + phaseName(phase) + " serialize round trip");
        std::string problem;
        try
        {
            harness::SerializedFields serialized(caps.runtime->getFieldsToSerialize());
            runtimePlugin.reset(
                mCreator->createPlugin("fuzz", serialized.collection(), TensorRTPhase::kRUNTIME));
            if (!runtimePlugin)
            {
                failure(phase, "createPlugin(kRUNTIME) rejects the plugin's own serialized fields: " +
                                   errorsLogged(mLogger));
                return false;
            }
            runtimeCaps = capabilitiesOf(runtimePlugin.get(), mPlugin, problem);
            if (!problem.empty())
            {
                failure(phase, "recreated plugin: " + problem);
                return false;
            }
            harness::SerializedFields again(runtimeCaps.runtime->getFieldsToSerialize());
            if (again.blob() != serialized.blob())
            {
                failure(phase, "serialize round trip changed the fields");
                return false;
            }
            PluginPtr cloned(runtimePlugin->clone());
            if (!cloned)
            {
                failure(phase, "clone returned null: " + errorsLogged(mLogger));
                return false;
            }
            ++mStats.roundTrips;
            if (mOptions.buildSampleEvery > 0 &&
                mRng.below(static_cast<uint64_t>(mOptions.buildSampleEvery)) == 0)
                return checkPlausibleBuild(phase, caps, runtimeCaps);
        }
        catch (std::exception const& e)
        {
            failure(phase, std::string("getFieldsToSerialize produced unusable fields: ") + e.what());
            return false;
        }
        return true;
    }

    //! The build calls with the spec's plausible shape for the recreated plugin's fields; false when the
    //! fields have none (the random-shape trials are then skipped, as before the split).
    bool checkPlausibleBuild(TensorRTPhase phase, Capabilities const& caps, Capabilities const& runtimeCaps)
    {
        setContext("fuzz " + mWhere + " " + phaseName(phase) + " build calls with a plausible shape");
        std::string problem;
        ReadBack const fields = readBack(runtimeCaps.runtime->getFieldsToSerialize());
        std::optional<Plausible> plausible = plausibleShapes(mPlugin, fields, problem);
        if (!plausible)
        {
            failure(phase, "no plausible shape: " + problem);
            return false;
        }
        std::string const buildProblem = checkBuildCalls(caps.build, *plausible, mLogger);
        ++mStats.buildChecks;
        if (!buildProblem.empty()) failure(phase, buildProblem);
        return true;
    }

    std::string const& mPlugin;
    IPluginCreatorV3One* mCreator;
    FuzzOptions const& mOptions;
    harness::RecordingLogger& mLogger;
    PluginStats& mStats;
    Rng mRng;
    std::string const mWhere;
    bool const mVerbose;
    std::string mViolated;  // the spec rule the collection breaks, if any (generate() says)
    FuzzCollection mCollection;
    bool mSpecValid{false};
};
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
            Iteration(plugin, creator, i, options, logger, stats).run(declared, corpus);
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
