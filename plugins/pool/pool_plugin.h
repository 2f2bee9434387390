// Pool: 2-D max or average pooling over H and W of an [N, C, H, W] tensor (ONNX MaxPool / AveragePool with
// floor rounding), FP32, FP16 or true INT8 (same type in and out, linear format).
// Fields: mode ("max" | "average", required), kernel (int32 [kh, kw], required), stride (int32 [sh, sw],
// default = kernel), padding (int32 [ph, pw], default [0, 0], each < kernel), count_include_pad (int32 0/1,
// default 0, average only), input_scale / output_scale (float32 > 0, required when the I/O type is INT8).
// Output: [N, C, (H + 2ph - kh) / sh + 1, (W + 2pw - kw) / sw + 1]. See plugins/pool/README.md.
#pragma once

#include <array>
#include <optional>

#include "../common/plugin_base.h"
#include "pool_kernel.h"

namespace trt_plugin_kit
{

struct PoolConfig
{
    PoolMode mode{PoolMode::kMAX};
    std::array<int32_t, 2> kernel{1, 1};
    std::array<int32_t, 2> stride{1, 1};
    std::array<int32_t, 2> padding{0, 0};
    bool countIncludePad{false};
    std::optional<float> inputScale;
    std::optional<float> outputScale;
};

class PoolPlugin final : public PluginOf<PoolPlugin>
{
public:
    static constexpr char const* kName = "Pool";
    static constexpr std::array kFields{
        FieldDeclaration{"mode", nvinfer1::PluginFieldType::kCHAR, -1},
        FieldDeclaration{"kernel", nvinfer1::PluginFieldType::kINT32, 2},
        FieldDeclaration{"stride", nvinfer1::PluginFieldType::kINT32, 2},
        FieldDeclaration{"padding", nvinfer1::PluginFieldType::kINT32, 2},
        FieldDeclaration{"count_include_pad", nvinfer1::PluginFieldType::kINT32, 1},
        FieldDeclaration{"input_scale", nvinfer1::PluginFieldType::kFLOAT32, 1},
        FieldDeclaration{"output_scale", nvinfer1::PluginFieldType::kFLOAT32, 1}};
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    explicit PoolPlugin(PoolConfig config) : mConfig(config) {}

protected:
    int32_t nbInputs() const override { return 1; }
    int32_t nbOutputs() const override { return 1; }
    TRT_PLUGIN_KIT_BUILD_HOOKS
    TRT_PLUGIN_KIT_CONFIGURE_HOOK
    TRT_PLUGIN_KIT_RUNTIME_HOOKS
    //! The kernels' launch shapes (pool_kernel.h), timed by TensorRT on the build GPU.
    int32_t nbTactics() const override;
    void selectTactic(int32_t tactic) override { mTactic = tactic; }

private:
    //! Throws unless `type` is FP32, FP16 or INT8 and, for INT8, both scales are set.
    void checkType(nvinfer1::DataType type) const;
    //! Output extent of spatial axis `axis` (0: H, 1: W) for an input extent `in`; throws when the window
    //! does not fit the padded input or the extent is out of range.
    int64_t outputExtent(int64_t in, int32_t axis) const;

    PoolConfig mConfig;
    // Launch geometry cached by onShapeChange (enqueue only launches).
    PoolGeometry mGeometry;
    nvinfer1::DataType mType{nvinfer1::DataType::kFLOAT};
    bool mReady{false};
    int32_t mTactic{0};  // 0: the default launch
};

using PoolCreator = PluginCreator<PoolPlugin>;

}  // namespace trt_plugin_kit
