#include "fields.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "checks.h"
#include "logging.h"

namespace trt_plugin_kit
{
using nvinfer1::PluginField;
using nvinfer1::PluginFieldType;

char const* fieldTypeName(PluginFieldType type)
{
    switch (type)
    {
        case PluginFieldType::kFLOAT16:
            return "float16";
        case PluginFieldType::kFLOAT32:
            return "float32";
        case PluginFieldType::kFLOAT64:
            return "float64";
        case PluginFieldType::kINT8:
            return "int8";
        case PluginFieldType::kINT16:
            return "int16";
        case PluginFieldType::kINT32:
            return "int32";
        case PluginFieldType::kCHAR:
            return "char";
        case PluginFieldType::kDIMS:
            return "dims";
        case PluginFieldType::kUNKNOWN:
            return "unknown";
        case PluginFieldType::kBF16:
            return "bfloat16";
        case PluginFieldType::kINT64:
            return "int64";
        case PluginFieldType::kFP8:
            return "fp8";
        case PluginFieldType::kINT4:
            return "int4";
        case PluginFieldType::kFP4:
            return "fp4";
    }
    return "invalid";
}

namespace
{
float halfToFloat(uint16_t h)
{
    uint32_t const sign = (h >> 15) & 1U;
    uint32_t const exponent = (h >> 10) & 0x1FU;
    uint32_t const mantissa = h & 0x3FFU;
    float value;
    if (exponent == 0)
    {
        value = std::ldexp(static_cast<float>(mantissa), -24);
    }
    else if (exponent == 31)
    {
        value =
            mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    }
    else
    {
        value = std::ldexp(static_cast<float>(mantissa | 0x400U), static_cast<int>(exponent) - 25);
    }
    return sign ? -value : value;
}
}  // namespace

FieldReader::FieldReader(char const* pluginName, nvinfer1::PluginFieldCollection const* fc,
                         std::vector<std::string> const& known)
    : mPlugin(pluginName)
{
    if (fc == nullptr)
    {
        return;  // No fields at all: every field takes its default or is reported missing.
    }
    check(fc->nbFields >= 0, "field collection has a negative count (", fc->nbFields, ")");
    check(fc->nbFields == 0 || fc->fields != nullptr, "field collection has ", fc->nbFields,
          " fields but a null field array");
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        PluginField const& f = fc->fields[i];
        check(f.name != nullptr, "field #", i, " has no name");
        std::string const name(f.name);
        check(mFields.count(name) == 0 && mEmpty.count(name) == 0, "field '", name,
              "' is given more than once");
        bool isKnown = false;
        for (auto const& k : known)
        {
            isKnown = isKnown || k == name;
        }
        if (!isKnown)
        {
            logWarning(concat(mPlugin, ": ignoring unknown field '", name, "'"));
            continue;
        }
        check(f.length >= 0 && f.length <= kMaxFieldElements, "field '", name, "' has invalid length ",
              f.length);
        check(f.length == 0 || f.data != nullptr, "field '", name, "' has length ", f.length, " but no data");
        if (f.length == 0)
        {
            // Not set: how an ONNX node says so, since TensorRT's parser warns about every declared field
            // missing from the node (our export writes an empty FLOATS/INTS attribute).
            mEmpty.insert(name);
            continue;
        }
        mFields.emplace(name, f);
    }
}

PluginField const& FieldReader::field(std::string const& name) const
{
    return mFields.at(name);
}

std::vector<double> FieldReader::numbers(std::string const& name, bool wantInteger) const
{
    PluginField const& f = field(name);
    bool const isIntegerType = f.type == PluginFieldType::kINT8 || f.type == PluginFieldType::kINT16 ||
                               f.type == PluginFieldType::kINT32 || f.type == PluginFieldType::kINT64;
    bool const isFloatType = f.type == PluginFieldType::kFLOAT16 || f.type == PluginFieldType::kFLOAT32 ||
                             f.type == PluginFieldType::kFLOAT64;
    // Types are checked before anything is allocated: a wrong-typed field of 2^28 elements must not cost 2
    // GiB. Strict typing both ways: an integer array handed to a float field is as much a mistake as the
    // reverse.
    check(wantInteger ? isIntegerType : isFloatType, "field '", name, "' has type ", fieldTypeName(f.type),
          ", expected ", wantInteger ? "an integer type (int32)" : "a float type (float32)");
    std::vector<double> out(static_cast<size_t>(f.length));
    auto copyAs = [&](auto const* data)
    {
        for (int32_t i = 0; i < f.length; ++i)
        {
            out[i] = static_cast<double>(data[i]);
        }
    };
    switch (f.type)
    {
        case PluginFieldType::kINT8:
            copyAs(static_cast<int8_t const*>(f.data));
            break;
        case PluginFieldType::kINT16:
            copyAs(static_cast<int16_t const*>(f.data));
            break;
        case PluginFieldType::kINT32:
            copyAs(static_cast<int32_t const*>(f.data));
            break;
        case PluginFieldType::kINT64:
            copyAs(static_cast<int64_t const*>(f.data));
            break;
        case PluginFieldType::kFLOAT32:
            check(!wantInteger, "field '", name, "' must be an integer, got float32");
            copyAs(static_cast<float const*>(f.data));
            break;
        case PluginFieldType::kFLOAT64:
            check(!wantInteger, "field '", name, "' must be an integer, got float64");
            copyAs(static_cast<double const*>(f.data));
            break;
        case PluginFieldType::kFLOAT16:
        {
            check(!wantInteger, "field '", name, "' must be an integer, got float16");
            auto const* data = static_cast<uint16_t const*>(f.data);
            for (int32_t i = 0; i < f.length; ++i)
            {
                out[i] = halfToFloat(data[i]);
            }
            break;
        }
        default:
            fail("field '", name, "' has type ", fieldTypeName(f.type), ", expected ",
                 wantInteger ? "an integer type (int32)" : "a float type (float32)");
    }
    for (int32_t i = 0; i < f.length; ++i)
    {
        if (wantInteger)
        {
            check(out[i] >= std::numeric_limits<int32_t>::min() &&
                      out[i] <= std::numeric_limits<int32_t>::max(),
                  "field '", name, "' value ", out[i], " does not fit int32");
        }
        else
        {
            check(std::isfinite(out[i]), "field '", name, "' element ", i, " is not finite (", out[i], ")");
            check(std::fabs(out[i]) <= std::numeric_limits<float>::max(), "field '", name, "' element ", i,
                  " overflows float32");
        }
    }
    return out;
}

std::optional<int32_t> FieldReader::getInt(std::string const& name) const
{
    if (!has(name))
    {
        return std::nullopt;
    }
    check(field(name).length == 1, "field '", name, "' must hold exactly 1 value, got ", field(name).length);
    return static_cast<int32_t>(numbers(name, true)[0]);
}

std::optional<float> FieldReader::getFloat(std::string const& name) const
{
    if (!has(name))
    {
        return std::nullopt;
    }
    check(field(name).length == 1, "field '", name, "' must hold exactly 1 value, got ", field(name).length);
    return static_cast<float>(numbers(name, false)[0]);
}

std::optional<std::vector<int32_t>> FieldReader::getInts(std::string const& name) const
{
    if (!has(name))
    {
        return std::nullopt;
    }
    check(field(name).length >= 1, "field '", name, "' is empty");
    std::vector<int32_t> out;
    for (double v : numbers(name, true))
    {
        out.push_back(static_cast<int32_t>(v));
    }
    return out;
}

std::optional<std::vector<float>> FieldReader::getFloats(std::string const& name) const
{
    if (!has(name))
    {
        return std::nullopt;
    }
    check(field(name).length >= 1, "field '", name, "' is empty");
    std::vector<float> out;
    out.reserve(static_cast<size_t>(field(name).length));
    for (double v : numbers(name, false))
    {
        out.push_back(static_cast<float>(v));
    }
    return out;
}

std::optional<std::string> FieldReader::getString(std::string const& name) const
{
    if (!has(name))
    {
        return std::nullopt;
    }
    PluginField const& f = field(name);
    check(f.type == PluginFieldType::kCHAR, "field '", name, "' has type ", fieldTypeName(f.type),
          ", expected char (a string)");
    auto const* chars = static_cast<char const*>(f.data);
    // Writers differ on whether the length counts a terminating NUL: stop at the first one.
    size_t const length = f.length == 0 ? 0 : strnlen(chars, static_cast<size_t>(f.length));
    return std::string(chars, length);
}

int32_t FieldReader::requireInt(std::string const& name) const
{
    auto value = getInt(name);
    check(value.has_value(), "required field '", name, "' is missing");
    return *value;
}

std::vector<float> FieldReader::requireFloats(std::string const& name) const
{
    auto value = getFloats(name);
    check(value.has_value(), "required field '", name, "' is missing");
    return *value;
}

void FieldWriter::clear()
{
    mInts.clear();
    mFloats.clear();
    mStrings.clear();
    mFields.clear();
}

void FieldWriter::addInt(char const* name, int32_t value)
{
    addInts(name, {value});
}

void FieldWriter::addFloat(char const* name, float value)
{
    addFloats(name, {value});
}

void FieldWriter::addInts(char const* name, std::vector<int32_t> const& values)
{
    mInts.push_back(values);
    mFields.emplace_back(name, mInts.back().data(), PluginFieldType::kINT32,
                         static_cast<int32_t>(values.size()));
}

void FieldWriter::addFloats(char const* name, std::vector<float> const& values)
{
    mFloats.push_back(values);
    mFields.emplace_back(name, mFloats.back().data(), PluginFieldType::kFLOAT32,
                         static_cast<int32_t>(values.size()));
}

void FieldWriter::addString(char const* name, std::string const& value)
{
    mStrings.push_back(value);
    // The length counts the terminating NUL, as TensorRT's own plugins and the ONNX parser do.
    mFields.emplace_back(name, mStrings.back().c_str(), PluginFieldType::kCHAR,
                         static_cast<int32_t>(value.size() + 1));
}

void FieldWriter::declare(char const* name, PluginFieldType type, int32_t length)
{
    mFields.emplace_back(name, nullptr, type, length);
}

nvinfer1::PluginFieldCollection const* FieldWriter::collection()
{
    mCollection.nbFields = static_cast<int32_t>(mFields.size());
    mCollection.fields = mFields.data();
    return &mCollection;
}

}  // namespace trt_plugin_kit
