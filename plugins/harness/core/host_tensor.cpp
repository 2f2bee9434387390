#include "core/host_tensor.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace harness
{
using namespace nvinfer1;

Dims makeDims(std::vector<int64_t> const& extents)
{
    Dims dims{};
    dims.nbDims = static_cast<int32_t>(extents.size());
    for (size_t i = 0; i < extents.size(); ++i)
    {
        dims.d[i] = extents[i];
    }
    return dims;
}

std::string toString(Dims const& dims)
{
    std::string out = "[";
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        out += (i ? "," : "") + std::to_string(dims.d[i]);
    }
    return out + "]";
}

int64_t volumeOf(Dims const& dims)
{
    int64_t v = 1;
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        v *= dims.d[i];
    }
    return v;
}

size_t sizeOf(DataType type)
{
    switch (type)
    {
        case DataType::kFLOAT:
            return 4;
        case DataType::kHALF:
            return 2;
        case DataType::kBF16:
            return 2;
        case DataType::kINT8:
            return 1;
        case DataType::kINT32:
            return 4;
        default:
            throw std::runtime_error("harness: unsupported type");
    }
}

char const* typeName(DataType type)
{
    switch (type)
    {
        case DataType::kFLOAT:
            return "fp32";
        case DataType::kHALF:
            return "fp16";
        case DataType::kINT8:
            return "int8";
        case DataType::kINT32:
            return "int32";
        case DataType::kBF16:
            return "bf16";
        case DataType::kBOOL:
            return "bool";
        case DataType::kUINT8:
            return "uint8";
        case DataType::kINT64:
            return "int64";
        default:
            return "other";
    }
}

HostTensor::HostTensor(DataType type_, Dims dims_) : type(type_), dims(dims_)
{
    bytes.assign(static_cast<size_t>(volumeOf(dims)) * sizeOf(type), 0);
}

double HostTensor::get(int64_t i) const
{
    switch (type)
    {
        case DataType::kFLOAT:
            return reinterpret_cast<float const*>(bytes.data())[i];
        case DataType::kHALF:
            return __half2float(reinterpret_cast<__half const*>(bytes.data())[i]);
        case DataType::kBF16:
            return __bfloat162float(reinterpret_cast<__nv_bfloat16 const*>(bytes.data())[i]);
        case DataType::kINT8:
            return reinterpret_cast<int8_t const*>(bytes.data())[i];
        case DataType::kINT32:
            return reinterpret_cast<int32_t const*>(bytes.data())[i];
        default:
            throw std::runtime_error("harness: unsupported type");
    }
}

void HostTensor::set(int64_t i, double value)
{
    switch (type)
    {
        case DataType::kFLOAT:
            reinterpret_cast<float*>(bytes.data())[i] = static_cast<float>(value);
            break;
        case DataType::kHALF:
            reinterpret_cast<__half*>(bytes.data())[i] = __float2half_rn(static_cast<float>(value));
            break;
        case DataType::kBF16:
            reinterpret_cast<__nv_bfloat16*>(bytes.data())[i] =
                __float2bfloat16_rn(static_cast<float>(value));
            break;
        case DataType::kINT8:
            reinterpret_cast<int8_t*>(bytes.data())[i] = static_cast<int8_t>(value);
            break;
        case DataType::kINT32:
            reinterpret_cast<int32_t*>(bytes.data())[i] = static_cast<int32_t>(value);
            break;
        default:
            throw std::runtime_error("harness: unsupported type");
    }
}

void fillUniform(HostTensor& tensor, std::mt19937& rng, double lo, double hi)
{
    bool integer = tensor.type == DataType::kINT8 || tensor.type == DataType::kINT32;
    std::uniform_real_distribution<double> real(lo, hi);
    std::uniform_int_distribution<int64_t> whole(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    int64_t const n = tensor.count();
    for (int64_t i = 0; i < n; ++i)
    {
        tensor.set(i, integer ? static_cast<double>(whole(rng)) : real(rng));
    }
    if (n > 0 && tensor.get(0) == 0.0)
    {
        tensor.set(0, integer ? 1.0 : 0.5 * (lo + hi) + 0.25 * (hi - lo));  // Never an all-zero input.
    }
}

size_t fieldTypeSize(PluginFieldType type)
{
    switch (type)
    {
        case PluginFieldType::kFLOAT16:
            return 2;
        case PluginFieldType::kFLOAT32:
            return 4;
        case PluginFieldType::kFLOAT64:
            return 8;
        case PluginFieldType::kINT8:
            return 1;
        case PluginFieldType::kINT16:
            return 2;
        case PluginFieldType::kINT32:
            return 4;
        case PluginFieldType::kCHAR:
            return 1;
        case PluginFieldType::kINT64:
            return 8;
        case PluginFieldType::kBF16:
            return 2;
        case PluginFieldType::kDIMS:
            return sizeof(Dims);
        default:
            return 1;
    }
}

FieldSet& FieldSet::addInts(std::string const& name, std::vector<int32_t> const& values)
{
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return addRaw(name, PluginFieldType::kINT32, bytes, static_cast<int32_t>(values.size()));
}

FieldSet& FieldSet::addFloats(std::string const& name, std::vector<float> const& values)
{
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return addRaw(name, PluginFieldType::kFLOAT32, bytes, static_cast<int32_t>(values.size()));
}

FieldSet& FieldSet::addString(std::string const& name, std::string const& value)
{
    std::vector<uint8_t> bytes(value.begin(), value.end());
    bytes.push_back(0);
    return addRaw(name, PluginFieldType::kCHAR, bytes, static_cast<int32_t>(bytes.size()));
}

FieldSet& FieldSet::addRaw(std::string const& name, PluginFieldType type, std::vector<uint8_t> const& bytes,
                           int32_t length, bool nullData)
{
    mEntries.push_back({name, type, bytes, length, nullData});
    return *this;
}

PluginFieldCollection const* FieldSet::collection()
{
    mFields.clear();
    for (auto const& e : mEntries)
    {
        mFields.emplace_back(e.name.c_str(), e.nullData ? nullptr : e.data.data(), e.type, e.length);
    }
    mCollection.nbFields = static_cast<int32_t>(mFields.size());
    mCollection.fields = mFields.data();
    return &mCollection;
}

std::string FieldSet::toJson() const
{
    std::ostringstream out;
    out.precision(9);
    out << "{";
    bool first = true;
    for (auto const& e : mEntries)
    {
        out << (first ? "" : ", ") << "\"" << e.name << "\": ";
        first = false;
        if (e.type == PluginFieldType::kCHAR)
        {
            out << "\"" << std::string(e.data.begin(), std::find(e.data.begin(), e.data.end(), uint8_t{0}))
                << "\"";
            continue;
        }
        out << "[";
        for (int32_t i = 0; i < e.length; ++i)
        {
            out << (i ? ", " : "");
            if (e.type == PluginFieldType::kFLOAT32)
            {
                float v;
                std::memcpy(&v, e.data.data() + 4 * i, 4);
                out << v;
            }
            else if (e.type == PluginFieldType::kINT32)
            {
                int32_t v;
                std::memcpy(&v, e.data.data() + 4 * i, 4);
                out << v;
            }
            else
            {
                out << "null";
            }
        }
        out << "]";
    }
    out << "}";
    return out.str();
}

SerializedFields::SerializedFields(PluginFieldCollection const* fc)
{
    if (fc == nullptr)
    {
        throw std::runtime_error("getFieldsToSerialize returned null");
    }
    auto put = [&](void const* p, size_t n)
    {
        auto const* b = static_cast<uint8_t const*>(p);
        mBlob.insert(mBlob.end(), b, b + n);
    };
    // Write: count, then (name length, name, type, length, data) per field.
    int32_t const count = fc->nbFields;
    put(&count, sizeof(count));
    for (int32_t i = 0; i < count; ++i)
    {
        PluginField const& f = fc->fields[i];
        if (f.name == nullptr || f.length < 0 || (f.length > 0 && f.data == nullptr))
        {
            throw std::runtime_error("getFieldsToSerialize produced a malformed field");
        }
        uint32_t const nameLength = static_cast<uint32_t>(std::strlen(f.name));
        put(&nameLength, sizeof(nameLength));
        put(f.name, nameLength);
        put(&f.type, sizeof(f.type));
        put(&f.length, sizeof(f.length));
        put(f.data, static_cast<size_t>(f.length) * fieldTypeSize(f.type));
    }
    // Read back into fresh storage.
    size_t offset = 0;
    auto get = [&](void* p, size_t n)
    {
        std::memcpy(p, mBlob.data() + offset, n);
        offset += n;
    };
    int32_t readCount = 0;
    get(&readCount, sizeof(readCount));
    for (int32_t i = 0; i < readCount; ++i)
    {
        uint32_t nameLength = 0;
        get(&nameLength, sizeof(nameLength));
        std::string name(nameLength, '\0');
        get(name.data(), nameLength);
        PluginFieldType type{};
        int32_t length = 0;
        get(&type, sizeof(type));
        get(&length, sizeof(length));
        std::vector<uint8_t> data(static_cast<size_t>(length) * fieldTypeSize(type));
        get(data.data(), data.size());
        mFields.addRaw(name, type, data, length);
    }
}

PluginFieldCollection const* SerializedFields::collection()
{
    return mFields.collection();
}

}  // namespace harness
