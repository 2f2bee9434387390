// plugin_stress fuzz: generated field collections for every creator in kBUILD and kRUNTIME, then the calls
// TensorRT makes on whatever was accepted (serialize round trip, build calls, random shapes). What is valid
// comes from the plugins' specs (plugin_specs.h): collections the spec allows must be accepted, collections
// that break one rule of the spec must be rejected with an error naming the field, and accepted plugins must
// build with the spec's plausible shape.
//
// Every collection is honest about its memory: a field's data holds at least length * element-size bytes
// (lengths above the library's kMaxFieldElements point into a read-only mapping that large). A collection
// that lies about its lengths makes the plugin read past the buffer, which no plugin can detect.
#include <sys/mman.h>

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

#include "../../common/fields.h"  // kMaxFieldElements: the documented largest array field
#include "conformance/runner.h"
#include "core/plugin_specs.h"
#include "stress/stress_common.h"

namespace stress
{
using namespace nvinfer1;

namespace
{
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

// ---------------------------------------------------------------- memory behind huge lengths
struct HugeRegion
{
    void const* base{nullptr};
    size_t bytes{0};
};

//! A read-only anonymous mapping (zero pages, no memory committed) large enough to back INT32_MAX elements
//! of any field type, so that even the largest lengths are backed by readable memory.
HugeRegion const& hugeRegion()
{
    static HugeRegion const region = []
    {
        HugeRegion r;
        for (size_t gib : {160, 17, 2})
        {
            size_t const bytes = gib << 30;
            void* p = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p != MAP_FAILED)
            {
                r.base = p;
                r.bytes = bytes;
                break;
            }
        }
        return r;
    }();
    return region;
}

//! Bytes per element a reader could assume for a field type: the harness's sizes for the types it knows,
//! 8 (the widest scalar) for kUNKNOWN and values outside the enum, so a fuzzed buffer is never too short.
size_t backingSize(int32_t type)
{
    bool const known = type >= static_cast<int32_t>(PluginFieldType::kFLOAT16) &&
                       type <= static_cast<int32_t>(PluginFieldType::kFP4) &&
                       type != static_cast<int32_t>(PluginFieldType::kUNKNOWN);
    return known ? harness::fieldTypeSize(static_cast<PluginFieldType>(type)) : 8;
}

char const* typeLabel(int32_t type)
{
    static char const* const names[] = {"f16",  "f32",  "f64",  "i8",  "i16", "i32",  "char",
                                        "dims", "unkn", "bf16", "i64", "fp8", "int4", "fp4"};
    return type >= 0 && type < 14 ? names[type] : "invalid";
}

// ---------------------------------------------------------------- generated collections
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

    PluginFieldCollection const* build()
    {
        mBuilt.clear();
        for (auto& f : fields)
        {
            void const* data = nullptr;
            if (f.data == FuzzField::Data::kOwned)
            {
                if (f.bytes.empty())
                {
                    f.bytes.push_back(0);  // A non-null pointer even for length 0.
                }
                data = f.bytes.data();
            }
            else if (f.data == FuzzField::Data::kHuge)
            {
                data = hugeRegion().base;
            }
            mBuilt.emplace_back(f.nullName ? nullptr : f.name.c_str(), data,
                                static_cast<PluginFieldType>(f.type), f.length);
        }
        mCollection.fields = mBuilt.data();
        mCollection.nbFields = static_cast<int32_t>(mBuilt.size());
        switch (shape)
        {
            case Shape::kNormal:
                break;
            case Shape::kNull:
                return nullptr;
            case Shape::kNegativeCount:
                mCollection.nbFields = negativeCount;
                break;
            case Shape::kNullFieldArray:
                mCollection.fields = nullptr;
                mCollection.nbFields = std::max<int32_t>(1, mCollection.nbFields);
                break;
            case Shape::kZeroCount:
                mCollection.nbFields = 0;
                break;
        }
        return &mCollection;
    }

    std::string describe() const
    {
        std::ostringstream out;
        out << origin << " ";
        switch (shape)
        {
            case Shape::kNormal:
                break;
            case Shape::kNull:
                out << "(null collection) ";
                break;
            case Shape::kNegativeCount:
                out << "(nbFields " << negativeCount << ") ";
                break;
            case Shape::kNullFieldArray:
                out << "(null field array) ";
                break;
            case Shape::kZeroCount:
                out << "(nbFields 0) ";
                break;
        }
        out << "{";
        for (size_t i = 0; i < fields.size(); ++i)
        {
            FuzzField const& f = fields[i];
            out << (i ? ", " : "");
            if (f.nullName)
            {
                out << "<null name>";
            }
            else
            {
                std::string shown;
                for (char c : f.name.substr(0, 24))
                {
                    shown += (c >= 32 && c < 127) ? c : '?';
                }
                out << "'" << shown << (f.name.size() > 24 ? "...'" : "'");
            }
            out << ":" << typeLabel(f.type) << "[" << f.length << "]";
            if (f.data == FuzzField::Data::kNull)
            {
                out << "=null";
            }
            else if (f.data == FuzzField::Data::kHuge)
            {
                out << "=<zero pages>";
            }
            else if (f.length > 0)
            {
                out << "=" << preview(f);
            }
        }
        out << "}";
        return out.str();
    }

private:
    static std::string preview(FuzzField const& f)
    {
        std::ostringstream out;
        int32_t const shown = std::min<int32_t>(f.length, 4);
        auto const type = static_cast<PluginFieldType>(f.type);
        if (type == PluginFieldType::kCHAR)
        {
            out << '"';
            for (int32_t i = 0; i < std::min<int32_t>(f.length, 16); ++i)
            {
                char const c = static_cast<char>(f.bytes[i]);
                out << ((c >= 32 && c < 127) ? c : (c == 0 ? '0' : '?'));
            }
            out << (f.length > 16 ? "...\"" : "\"");
            return out.str();
        }
        out << "(";
        for (int32_t i = 0; i < shown; ++i)
        {
            out << (i ? " " : "");
            if (type == PluginFieldType::kFLOAT32)
            {
                float v;
                std::memcpy(&v, f.bytes.data() + 4 * i, 4);
                out << v;
            }
            else if (type == PluginFieldType::kINT32)
            {
                int32_t v;
                std::memcpy(&v, f.bytes.data() + 4 * i, 4);
                out << v;
            }
            else if (type == PluginFieldType::kFLOAT64)
            {
                double v;
                std::memcpy(&v, f.bytes.data() + 8 * i, 8);
                out << v;
            }
            else if (type == PluginFieldType::kINT64)
            {
                int64_t v;
                std::memcpy(&v, f.bytes.data() + 8 * i, 8);
                out << v;
            }
            else
            {
                out << "0x" << std::hex << static_cast<int>(f.bytes[i]) << std::dec;
            }
        }
        out << (f.length > shown ? " ...)" : ")");
        return out.str();
    }

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

FuzzField intsField(std::string name, std::vector<int32_t> const& values)
{
    FuzzField f;
    f.name = std::move(name);
    f.type = static_cast<int32_t>(PluginFieldType::kINT32);
    f.length = static_cast<int32_t>(values.size());
    for (int32_t v : values) append(f.bytes, v);
    return f;
}

FuzzField floatsField(std::string name, std::vector<float> const& values)
{
    FuzzField f;
    f.name = std::move(name);
    f.type = static_cast<int32_t>(PluginFieldType::kFLOAT32);
    f.length = static_cast<int32_t>(values.size());
    for (float v : values) append(f.bytes, v);
    return f;
}

FuzzField stringField(std::string name, std::string const& value, bool countNul)
{
    FuzzField f;
    f.name = std::move(name);
    f.type = static_cast<int32_t>(PluginFieldType::kCHAR);
    f.bytes.assign(value.begin(), value.end());
    if (countNul)
    {
        f.bytes.push_back(0);
    }
    f.length = static_cast<int32_t>(f.bytes.size());
    return f;
}

//! Makes the field honest: owned data holds at least length * element-size bytes; huge lengths fit the
//! read-only region (or become merely large ones).
void makeBacked(FuzzField& f, Rng& rng)
{
    size_t const element = backingSize(f.type);
    if (f.data == FuzzField::Data::kHuge)
    {
        HugeRegion const& region = hugeRegion();
        size_t const capacity = region.bytes / element;
        if (static_cast<size_t>(std::max(f.length, 0)) > capacity)
        {
            f.length = static_cast<int32_t>(std::min<size_t>(capacity, std::numeric_limits<int32_t>::max()));
        }
        if (f.length <= kLengthLimit)
        {
            // No region large enough: a large (accepted-size) length in real memory instead.
            f.data = FuzzField::Data::kOwned;
            f.length = 1 << 12;
        }
        else
        {
            return;
        }
    }
    if (f.data == FuzzField::Data::kOwned && f.length > 0)
    {
        size_t const needed = static_cast<size_t>(f.length) * element;
        while (f.bytes.size() < needed)
        {
            f.bytes.push_back(static_cast<uint8_t>(rng.next()));
        }
    }
}

// ---------------------------------------------------------------- values
float specialFloat(Rng& rng)
{
    static std::vector<float> const values{std::numeric_limits<float>::quiet_NaN(),
                                           -std::numeric_limits<float>::quiet_NaN(),
                                           std::numeric_limits<float>::infinity(),
                                           -std::numeric_limits<float>::infinity(),
                                           0.F,
                                           -0.F,
                                           std::numeric_limits<float>::denorm_min(),
                                           std::numeric_limits<float>::min(),
                                           std::numeric_limits<float>::max(),
                                           -std::numeric_limits<float>::max(),
                                           1.F,
                                           -1.F,
                                           0.5F,
                                           1e-12F,
                                           1e30F,
                                           -1e-30F,
                                           2.F,
                                           65536.F};
    return rng.pick(values);
}

double specialDouble(Rng& rng)
{
    static std::vector<double> const values{std::numeric_limits<double>::quiet_NaN(),
                                            std::numeric_limits<double>::infinity(),
                                            -std::numeric_limits<double>::infinity(),
                                            0.0,
                                            -0.0,
                                            1e300,
                                            -1e300,
                                            1e39,
                                            std::numeric_limits<double>::denorm_min(),
                                            1.0,
                                            0.25,
                                            -3.0};
    return rng.pick(values);
}

int64_t specialInt(Rng& rng)
{
    static std::vector<int64_t> const values{0,
                                             1,
                                             -1,
                                             2,
                                             3,
                                             7,
                                             8,
                                             9,
                                             -8,
                                             -9,
                                             65536,
                                             65537,
                                             1 << 20,
                                             std::numeric_limits<int32_t>::max(),
                                             std::numeric_limits<int32_t>::min(),
                                             int64_t{1} << 31,
                                             -(int64_t{1} << 40),
                                             std::numeric_limits<int64_t>::max(),
                                             std::numeric_limits<int64_t>::min()};
    return rng.pick(values);
}

//! `length` values of `type`: plausible numbers, special values (NaN, infinities, extremes) or raw bytes.
std::vector<uint8_t> randomValues(int32_t type, int32_t length, Rng& rng)
{
    std::vector<uint8_t> bytes;
    if (length <= 0)
    {
        return bytes;
    }
    int const mode = static_cast<int>(rng.below(4));  // 0 plausible, 1 special, 2 mixed, 3 raw bytes
    size_t const element = backingSize(type);
    bytes.reserve(static_cast<size_t>(length) * element);
    for (int32_t i = 0; i < length; ++i)
    {
        bool const special = mode == 1 || (mode == 2 && rng.chance(0.3));
        switch (mode == 3 ? PluginFieldType::kUNKNOWN : static_cast<PluginFieldType>(type))
        {
            case PluginFieldType::kFLOAT32:
                append(bytes, special ? specialFloat(rng) : static_cast<float>(rng.uniform(-2.0, 2.0)));
                break;
            case PluginFieldType::kFLOAT64:
                append(bytes, special ? specialDouble(rng) : rng.uniform(-2.0, 2.0));
                break;
            case PluginFieldType::kFLOAT16:
            {
                static std::vector<uint16_t> const halves{0x7C00, 0xFC00, 0x7E00, 0x0000,
                                                          0x8000, 0x0001, 0x7BFF, 0x3C00};
                append(bytes, special ? rng.pick(halves) : static_cast<uint16_t>(0x3000 + rng.below(0x1000)));
                break;
            }
            case PluginFieldType::kINT8:
                append(bytes, static_cast<int8_t>(special ? specialInt(rng) : rng.range(-3, 9)));
                break;
            case PluginFieldType::kINT16:
                append(bytes, static_cast<int16_t>(special ? specialInt(rng) : rng.range(-3, 9)));
                break;
            case PluginFieldType::kINT32:
                append(bytes, static_cast<int32_t>(special ? specialInt(rng) : rng.range(-3, 9)));
                break;
            case PluginFieldType::kINT64:
                append(bytes, special ? specialInt(rng) : rng.range(-3, 9));
                break;
            case PluginFieldType::kCHAR:
                append(bytes, static_cast<char>(special ? static_cast<char>(rng.next())
                                                        : "maxvergin\0"[rng.below(10)]));
                break;
            default:
                for (size_t b = 0; b < element; ++b)
                {
                    bytes.push_back(static_cast<uint8_t>(rng.next()));
                }
        }
    }
    return bytes;
}

std::string randomString(Rng& rng)
{
    static std::vector<std::string> const known{
        "max",    "average", "MAX", "Max",     "avg", "min",      "",           "max ", " max",
        "averag", "mean",    "sum", "maximum", "lp",  "average2", "maxaverage", "none", "AVERAGE"};
    switch (rng.below(4))
    {
        case 0:
            return rng.pick(known);
        case 1:
        {
            std::string s(static_cast<size_t>(rng.range(1, 40)), ' ');
            for (char& c : s) c = static_cast<char>(rng.range(32, 126));
            return s;
        }
        case 2:
        {
            std::string s(static_cast<size_t>(rng.range(1, 300)), ' ');
            for (char& c : s) c = static_cast<char>(rng.range(1, 255));  // no NUL: length bounds the string
            return s;
        }
        default:
            return std::string(static_cast<size_t>(rng.range(1000, 20000)), 'a');
    }
}

//! A field length: mostly small and plausible, sometimes 0, large (real memory) or negative; nullopt means
//! huge (above the library's limit, backed by the read-only region).
std::optional<int32_t> randomLength(Rng& rng, int64_t declared)
{
    double const p = rng.uniform();
    if (p < 0.30) return declared > 0 && declared < (1 << 16) ? static_cast<int32_t>(declared) : 1;
    if (p < 0.45) return 1;
    if (p < 0.55) return 0;
    if (p < 0.65) return 2;
    if (p < 0.80) return static_cast<int32_t>(rng.range(3, 64));
    if (p < 0.90) return static_cast<int32_t>(rng.range(0, 8));
    if (p < 0.95) return static_cast<int32_t>(rng.range(1 << 10, 1 << 16));
    if (p < 0.98) return std::nullopt;
    return rng.chance(0.5) ? -static_cast<int32_t>(rng.range(1, 1000)) : std::numeric_limits<int32_t>::min();
}

int32_t hugeLength(Rng& rng)
{
    return rng.chance(0.5) ? kLengthLimit + 1
                           : static_cast<int32_t>(
                                 rng.range(int64_t{kLengthLimit} + 1, std::numeric_limits<int32_t>::max()));
}

struct DeclaredField
{
    std::string name;
    int32_t type;
    int32_t length;
};

std::vector<DeclaredField> declaredFields(IPluginCreatorV3One* creator)
{
    std::vector<DeclaredField> out;
    PluginFieldCollection const* fc = creator->getFieldNames();
    for (int32_t i = 0; fc != nullptr && i < fc->nbFields; ++i)
    {
        out.push_back({fc->fields[i].name, static_cast<int32_t>(fc->fields[i].type), fc->fields[i].length});
    }
    return out;
}

//! A field with a random name from `names`, random type (mostly the declared one), length and values.
FuzzField makeField(Rng& rng, std::string const& name, int32_t declaredType, int32_t declaredLength)
{
    FuzzField f;
    f.name = name;
    double const t = rng.uniform();
    f.type = t < 0.6    ? declaredType
             : t < 0.95 ? static_cast<int32_t>(rng.range(0, 13))
                        : static_cast<int32_t>(rng.pick(std::vector<int64_t>{14, 99, -1, 255}));
    if (static_cast<PluginFieldType>(f.type) == PluginFieldType::kCHAR && rng.chance(0.7))
    {
        FuzzField s = stringField(name, randomString(rng), rng.chance(0.7));
        s.type = f.type;
        return s;
    }
    std::optional<int32_t> const length = randomLength(rng, declaredLength);
    if (!length)
    {
        f.data = FuzzField::Data::kHuge;
        f.length = hugeLength(rng);
        return f;
    }
    f.length = *length;
    f.bytes = randomValues(f.type, f.length, rng);
    if (rng.chance(0.03))
    {
        f.data = FuzzField::Data::kNull;
    }
    return f;
}

std::string mutateName(std::string const& name, Rng& rng)
{
    switch (rng.below(7))
    {
        case 0:
            return "";
        case 1:
            return name + "_";
        case 2:
            return name.empty() ? "x" : name.substr(0, name.size() - 1);
        case 3:
        {
            std::string s = name;
            for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            return s;
        }
        case 4:
        {
            std::string s = name.empty() ? "a" : name;
            s[rng.below(s.size())] = static_cast<char>(rng.range(1, 255));
            return s;
        }
        case 5:
            return std::string(4096, 'n');
        default:
            return name + std::string(1, '\xff') + "x";
    }
}

std::vector<std::string> const& allFieldNames()
{
    static std::vector<std::string> const names = []
    {
        std::vector<std::string> out{"plugin_version",
                                     "plugin_namespace"};  // the ONNX node's lookup attributes
        for (auto const& spec : harness::pluginSpecs())
            for (auto const& f : spec.fields)
                if (std::find(out.begin(), out.end(), f.name) == out.end()) out.push_back(f.name);
        return out;
    }();
    return names;
}

harness::PluginSpec const& specOf(std::string const& plugin)
{
    for (auto const& spec : harness::pluginSpecs())
        if (spec.name == plugin) return spec;
    throw std::runtime_error("no spec for plugin " + plugin);
}

// ---------------------------------------------------------------- collections from the spec
//! One field being drafted: numbers (int32 or float32 values) or a string.
struct Draft
{
    harness::FieldSpec const* spec{nullptr};
    PluginFieldType type{PluginFieldType::kINT32};
    std::vector<double> numbers;
    std::string text;
    bool countNul{true};

    FuzzField field() const
    {
        if (type == PluginFieldType::kCHAR) return stringField(spec->name, text, countNul);
        if (type == PluginFieldType::kFLOAT32)
            return floatsField(spec->name, std::vector<float>(numbers.begin(), numbers.end()));
        std::vector<int32_t> ints;
        for (double v : numbers) ints.push_back(static_cast<int32_t>(v));
        return intsField(spec->name, ints);
    }
};

//! The value a field has in a collection: drafted, else its default (or the field it defaults to).
std::vector<double> effective(harness::PluginSpec const& spec, std::map<std::string, Draft> const& drafts,
                              std::string const& name)
{
    auto it = drafts.find(name);
    if (it != drafts.end()) return it->second.numbers;
    harness::FieldSpec const* f = spec.field(name);
    if (f != nullptr && !f->defaultFrom.empty()) return effective(spec, drafts, f->defaultFrom);
    return f != nullptr ? f->defaultNumbers : std::vector<double>{};
}

//! A value of element `index` of `f` within the spec's range.
double validNumber(harness::PluginSpec const& spec, harness::FieldSpec const& f,
                   std::map<std::string, Draft> const& drafts, size_t index, Rng& rng)
{
    if (!f.numberChoices.empty()) return rng.pick(f.numberChoices);
    bool const isInt = f.type == PluginFieldType::kINT32;
    std::optional<double> lo = f.min, hi = f.max;
    if (!lo && f.greaterThan) lo = *f.greaterThan + (isInt ? 1.0 : 1e-3);
    if (!f.lessThan.empty())
    {
        std::vector<double> const bound = effective(spec, drafts, f.lessThan);
        if (index < bound.size()) hi = std::min(hi.value_or(bound[index] - 1), bound[index] - 1);
    }
    if (isInt)
    {
        int64_t const low = static_cast<int64_t>(lo.value_or(-3));
        int64_t high = static_cast<int64_t>(hi.value_or(static_cast<double>(low + 8)));
        if (high - low > 64) high = low + 8;  // small, plausible values (kernels of 1..9, not of 65536)
        return static_cast<double>(rng.range(low, std::max(low, high)));
    }
    if (lo && hi) return rng.uniform(*lo, *hi);
    if (lo) return f.min && rng.chance(0.2) ? *lo : rng.uniform(*lo, *lo + 10.0);  // the boundary too
    if (hi) return rng.uniform(*hi - 10.0, *hi);
    return rng.uniform(-2.0, 2.0);
}

Draft validDraft(harness::PluginSpec const& spec, harness::FieldSpec const& f,
                 std::map<std::string, Draft> const& drafts, Rng& rng)
{
    Draft d;
    d.spec = &f;
    d.type = f.type;
    if (f.type == PluginFieldType::kCHAR)
    {
        d.text = f.stringChoices.empty() ? "text" : rng.pick(f.stringChoices);
        d.countNul = rng.chance(0.8);
        return d;
    }
    int64_t count = f.length > 0 ? f.length : (rng.chance(0.3) ? 1 : rng.range(1, 64));
    if (!f.lengthEquals.empty()) count = static_cast<int64_t>(effective(spec, drafts, f.lengthEquals).at(0));
    if (!f.lengthMultipleOf.empty())
        count = static_cast<int64_t>(effective(spec, drafts, f.lengthMultipleOf).at(0)) * rng.range(1, 64);
    for (int64_t i = 0; i < count; ++i)
        d.numbers.push_back(validNumber(spec, f, drafts, static_cast<size_t>(i), rng));
    return d;
}

//! Fields that others refer to (ranges, lengths, defaults) come first.
std::vector<harness::FieldSpec const*> draftingOrder(harness::PluginSpec const& spec)
{
    std::vector<harness::FieldSpec const*> first, then;
    for (auto const& f : spec.fields)
    {
        bool referenced = false;
        for (auto const& other : spec.fields)
            referenced = referenced || other.lessThan == f.name || other.lengthEquals == f.name ||
                         other.lengthMultipleOf == f.name || other.defaultFrom == f.name;
        (referenced ? first : then).push_back(&f);
    }
    first.insert(first.end(), then.begin(), then.end());
    return first;
}

std::map<std::string, Draft> validDrafts(harness::PluginSpec const& spec, Rng& rng,
                                         std::string const& alwaysInclude = "")
{
    std::map<std::string, Draft> drafts;
    for (auto const* f : draftingOrder(spec))
    {
        if (f->required || f->name == alwaysInclude || rng.chance(0.6))
            drafts.emplace(f->name, validDraft(spec, *f, drafts, rng));
    }
    return drafts;
}

FuzzCollection collectionOf(std::map<std::string, Draft> const& drafts, std::string origin, Rng& rng)
{
    FuzzCollection c;
    c.origin = std::move(origin);
    for (auto const& entry : drafts) c.fields.push_back(entry.second.field());
    for (size_t i = c.fields.size(); i > 1; --i) std::swap(c.fields[i - 1], c.fields[rng.below(i)]);
    return c;
}

//! Fields the spec allows: createPlugin must accept them.
FuzzCollection validCollection(std::string const& plugin, Rng& rng)
{
    FuzzCollection c = collectionOf(validDrafts(specOf(plugin), rng), "valid", rng);
    if (c.fields.empty() && rng.chance(0.3)) c.shape = FuzzCollection::Shape::kNull;
    return c;
}

//! Valid fields but for one rule of the spec: createPlugin must reject them, naming the field. Without a
//! breakable rule (no fields), a valid collection.
FuzzCollection violatingCollection(std::string const& plugin, Rng& rng, std::string& field)
{
    harness::PluginSpec const& spec = specOf(plugin);
    if (spec.fields.empty()) return validCollection(plugin, rng);
    harness::FieldSpec const& f = spec.fields[rng.below(spec.fields.size())];
    std::map<std::string, Draft> drafts = validDrafts(spec, rng, f.name);
    Draft& d = drafts.at(f.name);
    bool const isFloat = f.type == PluginFieldType::kFLOAT32, isChar = f.type == PluginFieldType::kCHAR;
    std::vector<std::string> rules{"wrong type"};
    if (f.required) rules.push_back("missing");
    if (isFloat) rules.push_back("not finite");
    if (f.min) rules.push_back("below min");
    if (f.max) rules.push_back("above max");
    if (f.greaterThan) rules.push_back("not greater");
    if (!f.numberChoices.empty() || !f.stringChoices.empty()) rules.push_back("not a choice");
    if (!f.lessThan.empty()) rules.push_back("not less");
    if (f.length > 0 || !f.lengthEquals.empty()) rules.push_back("wrong length");
    if (!f.lengthMultipleOf.empty() && effective(spec, drafts, f.lengthMultipleOf).at(0) >= 2)
        rules.push_back("not a multiple");
    std::string const rule = rng.pick(rules);
    size_t const at = d.numbers.empty() ? 0 : rng.below(d.numbers.size());
    if (rule == "missing")
        drafts.erase(f.name);
    else if (rule == "wrong type")
        d.type = isChar || isFloat ? PluginFieldType::kINT32 : PluginFieldType::kFLOAT32;
    else if (rule == "not finite")
        d.numbers[at] = std::numeric_limits<double>::quiet_NaN();
    else if (rule == "below min")
        d.numbers[at] = isFloat ? *f.min - std::max(1e-3, std::fabs(*f.min) * 0.5) : *f.min - 1;
    else if (rule == "above max")
        d.numbers[at] = isFloat ? *f.max + std::max(1e-3, std::fabs(*f.max) * 0.5) : *f.max + 1;
    else if (rule == "not greater")
        d.numbers[at] = *f.greaterThan - (rng.chance(0.5) ? 0.0 : 1.0);
    else if (rule == "not a choice" && isChar)
        d.text = d.text + "x";
    else if (rule == "not a choice")
        d.numbers[at] = *std::max_element(f.numberChoices.begin(), f.numberChoices.end()) + 1;
    else if (rule == "not less")
        d.numbers[at] = effective(spec, drafts, f.lessThan).at(at);
    else  // a length the spec does not allow: one value more
        d.numbers.push_back(d.numbers.empty() ? 1.0 : d.numbers.back());
    if (isChar && rule == "wrong type") d.numbers = {0.0};
    field = f.name;
    return collectionOf(drafts, "spec violation (" + f.name + ": " + rule + ")", rng);
}

//! The suite's field sets for `plugin` (conformance cases and rejections) as fuzz seeds.
std::vector<FuzzCollection> corpusFor(std::string const& plugin)
{
    std::vector<FuzzCollection> corpus;
    auto add = [&](harness::FieldSet fields, std::string const& label)
    {
        FuzzCollection c;
        c.origin = "suite '" + label + "'";
        PluginFieldCollection const* fc = fields.collection();
        for (int32_t i = 0; i < fc->nbFields; ++i)
        {
            PluginField const& pf = fc->fields[i];
            FuzzField f;
            f.name = pf.name;
            f.type = static_cast<int32_t>(pf.type);
            f.length = pf.length;
            if (pf.data == nullptr)
            {
                f.data = FuzzField::Data::kNull;
            }
            else if (pf.length > 0)
            {
                size_t const n =
                    static_cast<size_t>(std::min(pf.length, 1 << 20)) * harness::fieldTypeSize(pf.type);
                auto const* b = static_cast<uint8_t const*>(pf.data);
                f.bytes.assign(b, b + n);
                f.length = std::min(pf.length, 1 << 20);
            }
            c.fields.push_back(std::move(f));
        }
        corpus.push_back(std::move(c));
    };
    harness::Suite const& suite = conformanceSuite();
    for (auto const& c : suite.cases)
        if (c.plugin == plugin && inputElements(c) <= (1 << 20)) add(c.fields, c.label);
    for (auto const& r : suite.rejects)
        if (r.plugin == plugin) add(r.fields, "rejects " + r.label);
    for (auto const& s : suite.shapeErrors)
        if (s.plugin == plugin) add(s.fields, "shape error " + s.label);
    return corpus;
}

void mutate(FuzzCollection& c, Rng& rng, std::vector<DeclaredField> const& declared)
{
    auto& f = c.fields;
    auto randomIndex = [&] { return rng.below(f.size()); };
    switch (rng.below(13))
    {
        case 0:  // drop a field
            if (!f.empty()) f.erase(f.begin() + static_cast<std::ptrdiff_t>(randomIndex()));
            break;
        case 1:  // duplicate a field
            if (!f.empty()) f.push_back(f[randomIndex()]);
            break;
        case 2:  // rename
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                if (rng.chance(0.1))
                    x.nullName = true;
                else
                    x.name = mutateName(x.name, rng);
            }
            break;
        case 3:  // retype (the bytes stay, padded to the new element size)
            if (!f.empty())
                f[randomIndex()].type = static_cast<int32_t>(rng.chance(0.9) ? rng.range(0, 13) : 42);
            break;
        case 4:  // change the length
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                std::optional<int32_t> const length = randomLength(rng, int64_t{x.length} + rng.range(-1, 1));
                if (!length)
                {
                    x.data = FuzzField::Data::kHuge;
                    x.length = hugeLength(rng);
                }
                else
                {
                    x.length = *length;
                    if (x.data == FuzzField::Data::kHuge) x.data = FuzzField::Data::kOwned;
                }
            }
            break;
        case 5:  // special values in place
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                if (x.data == FuzzField::Data::kOwned && x.length > 0)
                {
                    int32_t const i = static_cast<int32_t>(rng.below(static_cast<uint64_t>(x.length)));
                    std::vector<uint8_t> value = randomValues(x.type, 1, rng);
                    size_t const at = static_cast<size_t>(i) * backingSize(x.type);
                    if (at + value.size() <= x.bytes.size())
                        std::copy(value.begin(), value.end(),
                                  x.bytes.begin() + static_cast<std::ptrdiff_t>(at));
                }
            }
            break;
        case 6:  // random bytes
            if (!f.empty())
            {
                for (auto& b : f[randomIndex()].bytes) b = static_cast<uint8_t>(rng.next());
            }
            break;
        case 7:  // an unknown field
            f.push_back(makeField(rng, mutateName(rng.pick(allFieldNames()), rng),
                                  static_cast<int32_t>(rng.range(0, 13)), 1));
            break;
        case 8:  // a field of another plugin, or a declared one with random content
        {
            if (rng.chance(0.5) || declared.empty())
            {
                f.push_back(makeField(rng, rng.pick(allFieldNames()),
                                      static_cast<int32_t>(PluginFieldType::kINT32), 1));
            }
            else
            {
                DeclaredField const& d = rng.pick(declared);
                f.push_back(makeField(rng, d.name, d.type, d.length));
            }
            break;
        }
        case 9:  // null data
            if (!f.empty()) f[randomIndex()].data = FuzzField::Data::kNull;
            break;
        case 10:  // a random string in a field
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                FuzzField s = stringField(x.name, randomString(rng), rng.chance(0.6));
                s.nullName = x.nullName;
                x = std::move(s);
            }
            break;
        case 11:  // mismatch counts: another length for an array with its content regenerated
            if (!f.empty())
            {
                FuzzField& x = f[randomIndex()];
                x.length = static_cast<int32_t>(rng.range(0, 70));
                x.bytes = randomValues(x.type, x.length, rng);
                x.data = FuzzField::Data::kOwned;
            }
            break;
        default:  // structural
        {
            static std::vector<int64_t> const shapes{1, 2, 3, 4};
            c.shape = static_cast<FuzzCollection::Shape>(rng.pick(shapes));
            c.negativeCount = rng.chance(0.5) ? -1 : std::numeric_limits<int32_t>::min();
            break;
        }
    }
}

FuzzCollection generate(std::string const& plugin, Rng& rng, std::vector<DeclaredField> const& declared,
                        std::vector<FuzzCollection> const& corpus, std::string& violatedField)
{
    FuzzCollection c;
    violatedField.clear();
    double const p = rng.uniform();
    if (p < 0.10)
    {
        c = validCollection(plugin, rng);
    }
    else if (p < 0.20)
    {
        c = violatingCollection(plugin, rng, violatedField);
    }
    else if (p < 0.45)
    {
        c = validCollection(plugin, rng);
        c.origin = "mutated valid";
        for (int64_t n = rng.range(1, 3); n > 0; --n) mutate(c, rng, declared);
    }
    else if (p < 0.60 && !corpus.empty())
    {
        c = rng.pick(corpus);
        c.origin = "mutated " + c.origin;
        for (int64_t n = rng.range(1, 3); n > 0; --n) mutate(c, rng, declared);
    }
    else if (p < 0.85)
    {
        c.origin = "schema";
        for (auto const& d : declared)
        {
            if (rng.chance(0.7)) c.fields.push_back(makeField(rng, d.name, d.type, d.length));
            if (rng.chance(0.05)) c.fields.push_back(makeField(rng, d.name, d.type, d.length));  // duplicate
        }
        if (rng.chance(0.2))
            c.fields.push_back(
                makeField(rng, rng.pick(allFieldNames()), static_cast<int32_t>(rng.range(0, 13)), 1));
    }
    else if (p < 0.95)
    {
        c.origin = "garbage";
        for (int64_t n = rng.range(0, 6); n > 0; --n)
        {
            std::string name = rng.chance(0.5) ? rng.pick(allFieldNames()) : randomString(rng).substr(0, 64);
            c.fields.push_back(makeField(rng, name, static_cast<int32_t>(rng.range(0, 13)),
                                         static_cast<int32_t>(rng.range(0, 4))));
        }
    }
    else
    {
        c = validCollection(plugin, rng);
        c.origin = "structural";
        static std::vector<int64_t> const shapes{1, 2, 3, 4};
        c.shape = static_cast<FuzzCollection::Shape>(rng.pick(shapes));
        c.negativeCount =
            static_cast<int32_t>(rng.chance(0.5) ? -1 : rng.range(std::numeric_limits<int32_t>::min(), -2));
        if (c.fields.empty()) c.fields.push_back(makeField(rng, rng.pick(allFieldNames()), 5, 1));
    }
    for (auto& f : c.fields) makeBacked(f, rng);
    return c;
}

// ---------------------------------------------------------------- what an accepted plugin must survive
//! Canonical fields as the plugin serialized them (names to int or float arrays, or a string).
struct ReadBack
{
    std::map<std::string, std::vector<int64_t>> ints;
    std::map<std::string, std::vector<double>> floats;
    std::map<std::string, std::string> strings;
};

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

struct Plausible
{
    std::vector<harness::TensorSpec> inputs;
    std::vector<harness::TensorSpec> outputs;
};

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

// ---------------------------------------------------------------- random shapes for accepted plugins
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
    if (p < 0.7) return rng.chance(0.5) ? DataType::kHALF : DataType::kINT8;
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

void runFuzz(FuzzOptions const& options, harness::RecordingLogger& logger, Counts& counts)
{
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
