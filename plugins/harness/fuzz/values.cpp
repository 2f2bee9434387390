// plugin_stress fuzz: random and special values, lengths and names; the declared fields.
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

}  // namespace stress::fuzz
