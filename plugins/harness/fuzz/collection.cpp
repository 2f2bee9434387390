// plugin_stress fuzz: generated field collections and the field builders.
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
namespace
{
//! Element i of a field's bytes read as T.
template <typename T>
T element(std::vector<uint8_t> const& bytes, int32_t i)
{
    T value;
    std::memcpy(&value, bytes.data() + sizeof(T) * static_cast<size_t>(i), sizeof(T));
    return value;
}
}  // namespace

PluginFieldCollection const* FuzzCollection::build()
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
        mBuilt.emplace_back(f.nullName ? nullptr : f.name.c_str(), data, static_cast<PluginFieldType>(f.type),
                            f.length);
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

std::string FuzzCollection::describe() const
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

std::string FuzzCollection::preview(FuzzField const& f)
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
            out << element<float>(f.bytes, i);
        else if (type == PluginFieldType::kINT32)
            out << element<int32_t>(f.bytes, i);
        else if (type == PluginFieldType::kFLOAT64)
            out << element<double>(f.bytes, i);
        else if (type == PluginFieldType::kINT64)
            out << element<int64_t>(f.bytes, i);
        else
        {
            out << "0x" << std::hex << static_cast<int>(f.bytes[i]) << std::dec;
        }
    }
    out << (f.length > shown ? " ...)" : ")");
    return out.str();
}

namespace
{
template <typename T>
FuzzField arrayField(std::string name, PluginFieldType type, std::vector<T> const& values)
{
    FuzzField f;
    f.name = std::move(name);
    f.type = static_cast<int32_t>(type);
    f.length = static_cast<int32_t>(values.size());
    for (T v : values) append(f.bytes, v);
    return f;
}
}  // namespace

FuzzField intsField(std::string name, std::vector<int32_t> const& values)
{
    return arrayField(std::move(name), PluginFieldType::kINT32, values);
}

FuzzField floatsField(std::string name, std::vector<float> const& values)
{
    return arrayField(std::move(name), PluginFieldType::kFLOAT32, values);
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

}  // namespace stress::fuzz
