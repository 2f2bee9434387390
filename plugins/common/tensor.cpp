#include "tensor.h"

#include "checks.h"

namespace trt_plugin_kit
{
using nvinfer1::DataType;

size_t elementSize(DataType type)
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
        case DataType::kUINT8:
            return 1;
        case DataType::kBOOL:
            return 1;
        case DataType::kFP8:
            return 1;
        case DataType::kINT32:
            return 4;
        case DataType::kINT64:
            return 8;
        default:
            fail("unsupported data type ", static_cast<int32_t>(type));
    }
}

char const* dataTypeName(DataType type)
{
    switch (type)
    {
        case DataType::kFLOAT:
            return "FP32";
        case DataType::kHALF:
            return "FP16";
        case DataType::kBF16:
            return "BF16";
        case DataType::kINT8:
            return "INT8";
        case DataType::kUINT8:
            return "UINT8";
        case DataType::kBOOL:
            return "BOOL";
        case DataType::kFP8:
            return "FP8";
        case DataType::kINT32:
            return "INT32";
        case DataType::kINT64:
            return "INT64";
        default:
            return "OTHER";
    }
}

std::string dimsToString(nvinfer1::Dims const& dims)
{
    std::string out = "[";
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        out += (i ? ", " : "") + std::to_string(dims.d[i]);
    }
    return out + "]";
}

int64_t volume(nvinfer1::Dims const& dims, int32_t begin, int32_t end)
{
    if (end < 0)
    {
        end = dims.nbDims;
    }
    int64_t v = 1;
    for (int32_t i = begin; i < end; ++i)
    {
        check(dims.d[i] >= 0, "dimension ", i, " of ", dimsToString(dims), " is not known");
        v *= dims.d[i];
    }
    return v;
}

int32_t normalizeAxis(int32_t axis, int32_t rank, char const* plugin)
{
    check(axis >= -rank && axis < rank, plugin, ": axis ", axis, " is out of range for an input of rank ",
          rank);
    return axis < 0 ? axis + rank : axis;
}

}  // namespace trt_plugin_kit
