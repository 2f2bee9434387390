// Small helpers over TensorRT tensor descriptions: element sizes, names, dims arithmetic.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <string>

namespace trt_plugin_kit
{

size_t elementSize(nvinfer1::DataType type);
char const* dataTypeName(nvinfer1::DataType type);
std::string dimsToString(nvinfer1::Dims const& dims);
//! Product of dims[begin, end); every extent must be known (>= 0).
int64_t volume(nvinfer1::Dims const& dims, int32_t begin = 0, int32_t end = -1);
//! Resolves a possibly negative axis against `rank`; throws PluginError when out of range.
int32_t normalizeAxis(int32_t axis, int32_t rank, char const* plugin);

}  // namespace trt_plugin_kit
