// plugin_stress fuzz, its parts: what the files of this folder share. One concern a file:
//   huge_memory.cpp      read-only memory behind lengths above the library's limit
//   collection.cpp       a generated PluginFieldCollection (FuzzField, FuzzCollection) and field builders
//   values.cpp           random and special values, lengths, names; the creators' declared fields
//   spec_collections.cpp collections from the spec (valid ones, ones breaking one rule), the corpus, mutation
//   accepted_checks.cpp  what an accepted plugin must survive: serialized fields read back, build calls
//   shape_trials.cpp     random shapes, types and counts for accepted plugins
//   fuzz_run.cpp         one iteration per (plugin, index) and runFuzz (declared in stress/stress_common.h)
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../../common/fields.h"  // kMaxFieldElements: the documented largest array field
#include "core/plugin_specs.h"
#include "stress/stress_common.h"

namespace stress::fuzz
{
using namespace nvinfer1;

constexpr int32_t kLengthLimit = trt_plugin_kit::kMaxFieldElements;
constexpr int32_t kMaxArray = 8;  // every tensor array handed to a plugin has room for 8 entries

//! Deterministic generator: the same (seed, plugin, iteration) always yields the same collection.
class Rng
{
public:
    explicit Rng(uint64_t seed) : mEngine(seed) {}
    uint64_t next() { return mEngine(); }
    uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
    int64_t range(int64_t lo, int64_t hi)
    {
        return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    bool chance(double p) { return uniform() < p; }
    template <typename T>
    T const& pick(std::vector<T> const& values)
    {
        return values[below(values.size())];
    }

private:
    std::mt19937_64 mEngine;
};

// ---- huge_memory.cpp
struct HugeRegion
{
    void const* base{nullptr};
    size_t bytes{0};
};

//! A read-only anonymous mapping (zero pages, no memory committed) large enough to back INT32_MAX elements
//! of any field type, so that even the largest lengths are backed by readable memory.
HugeRegion const& hugeRegion();
//! Bytes per element a reader could assume for a field type (8 for unknown types).
size_t backingSize(int32_t type);
char const* typeLabel(int32_t type);

// ---- collection.cpp
struct FuzzField
{
    enum class Data
    {
        kOwned,
        kNull,
        kHuge
    };
    std::string name;
    bool nullName{false};
    int32_t type{static_cast<int32_t>(PluginFieldType::kINT32)};
    int32_t length{0};
    std::vector<uint8_t> bytes;
    Data data{Data::kOwned};
};

struct FuzzCollection
{
    enum class Shape
    {
        kNormal,
        kNull,
        kNegativeCount,
        kNullFieldArray,
        kZeroCount
    };
    Shape shape{Shape::kNormal};
    int32_t negativeCount{-1};
    std::vector<FuzzField> fields;
    std::string origin;

    //! The collection a creator receives (pointers into this object: valid until the next build()).
    PluginFieldCollection const* build();
    //! One line for a failure message: the origin, the shape, each field with a preview of its values.
    std::string describe() const;

private:
    static std::string preview(FuzzField const& f);

    std::vector<PluginField> mBuilt;
    PluginFieldCollection mCollection{};
};

template <typename T>
void append(std::vector<uint8_t>& bytes, T value)
{
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    bytes.insert(bytes.end(), raw, raw + sizeof(T));
}

FuzzField intsField(std::string name, std::vector<int32_t> const& values);
FuzzField floatsField(std::string name, std::vector<float> const& values);
FuzzField stringField(std::string name, std::string const& value, bool countNul);
//! Gives a field memory for its length (owned bytes, or the huge region above kLengthLimit).
void makeBacked(FuzzField& f, Rng& rng);

// ---- values.cpp
struct DeclaredField
{
    std::string name;
    int32_t type;
    int32_t length;
};
float specialFloat(Rng& rng);
std::vector<uint8_t> randomValues(int32_t type, int32_t length, Rng& rng);
std::string randomString(Rng& rng);
std::optional<int32_t> randomLength(Rng& rng, int64_t declared);
int32_t hugeLength(Rng& rng);
std::vector<DeclaredField> declaredFields(IPluginCreatorV3One* creator);
FuzzField makeField(Rng& rng, std::string const& name, int32_t declaredType, int32_t declaredLength);
std::string mutateName(std::string const& name, Rng& rng);
std::vector<std::string> const& allFieldNames();
harness::PluginSpec const& specOf(std::string const& plugin);

// ---- spec_collections.cpp
//! The conformance suite's field sets of the plugin, the seeds of mutation.
std::vector<FuzzCollection> corpusFor(std::string const& plugin);
//! One collection: from the spec (valid, or breaking one rule: `violatedField` names it), mutated from the
//! corpus, or random.
FuzzCollection generate(std::string const& plugin, Rng& rng, std::vector<DeclaredField> const& declared,
                        std::vector<FuzzCollection> const& corpus, std::string& violatedField);

// ---- accepted_checks.cpp
//! Canonical fields as the plugin serialized them (names to int or float arrays, or a string).
struct ReadBack
{
    std::map<std::string, std::vector<int64_t>> ints;
    std::map<std::string, std::vector<double>> floats;
    std::map<std::string, std::string> strings;
};
struct Plausible
{
    std::vector<harness::TensorSpec> inputs;
    std::vector<harness::TensorSpec> outputs;
};
ReadBack readBack(PluginFieldCollection const* fc);
//! The spec's `shapes` evaluated on the fields, or nullopt with `problem` set.
std::optional<Plausible> plausibleShapes(std::string const& plugin, ReadBack const& f, std::string& problem);
//! The build-phase calls on the plausible shape; returns the problems found (empty: none).
std::string checkBuildCalls(IPluginV3OneBuild* build, Plausible const& p, harness::RecordingLogger& logger);

// ---- shape_trials.cpp
//! Random shapes, types and counts through the build and runtime calls; returns the problems found.
std::string shapeTrial(Capabilities const& build, Capabilities const& runtime, int32_t nbInputs,
                       int32_t nbOutputs, int32_t plausibleRank, Rng& rng, harness::RecordingLogger& logger,
                       int64_t& errorsReported);

}  // namespace stress::fuzz
