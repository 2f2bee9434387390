// Small helpers over TensorRT tensor descriptions: element sizes, names, dims arithmetic.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <string>

#include "element_type.h"

namespace trt_plugin_kit
{

size_t elementSize(nvinfer1::DataType type);
char const* dataTypeName(nvinfer1::DataType type);
std::string dimsToString(nvinfer1::Dims const& dims);
//! Product of dims[begin, end); every extent must be known (>= 0).
int64_t volume(nvinfer1::Dims const& dims, int32_t begin = 0, int32_t end = -1);
//! Resolves a possibly negative axis against `rank`; throws PluginError when out of range.
int32_t normalizeAxis(int32_t axis, int32_t rank, char const* plugin);

static_assert(
    static_cast<int32_t>(ElementType::kFLOAT) == static_cast<int32_t>(nvinfer1::DataType::kFLOAT) &&
        static_cast<int32_t>(ElementType::kHALF) == static_cast<int32_t>(nvinfer1::DataType::kHALF) &&
        static_cast<int32_t>(ElementType::kINT8) == static_cast<int32_t>(nvinfer1::DataType::kINT8) &&
        static_cast<int32_t>(ElementType::kINT32) == static_cast<int32_t>(nvinfer1::DataType::kINT32) &&
        static_cast<int32_t>(ElementType::kBF16) == static_cast<int32_t>(nvinfer1::DataType::kBF16),
    "ElementType must keep nvinfer1::DataType's values");
//! What a kernel launcher is told for a tensor of `type` (a type no kernel takes stays a value none accepts).
inline ElementType elementType(nvinfer1::DataType type)
{
    return static_cast<ElementType>(type);
}

}  // namespace trt_plugin_kit
