// The element types a kernel launcher is told, without TensorRT's headers: the kernels (.cu) include no
// TensorRT header, so that their objects are the same for every header set and compile once (ccache serves
// the second set's build from the first's). The values are nvinfer1::DataType's; common/tensor.h converts and
// checks that.
#pragma once

#include <cstdint>

namespace trt_plugin_kit
{

enum class ElementType : int32_t
{
    kFLOAT = 0,
    kHALF = 1,
    kINT8 = 2,
    kINT32 = 3,
    kBF16 = 7,
};

}  // namespace trt_plugin_kit
