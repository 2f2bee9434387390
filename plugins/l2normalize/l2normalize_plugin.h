// L2Normalize: TensorFlow's l2_normalize as a TensorRT plugin.
//   y = x / sqrt(max(sum(x^2 over axis), eps))
// Fields: axis (int32, default -1, negative counts from the end), eps (float32, default 1e-12, >= 0).
#pragma once

#include "../common/unary_plugin.h"

namespace trt_plugin_kit
{

struct L2NormalizeParams
{
    int32_t axis{-1};
    float eps{1e-12F};
};

class L2NormalizePlugin final : public PluginOf<L2NormalizePlugin, UnaryFloatPlugin>
{
public:
    static constexpr char const* kName = "L2Normalize";
    static constexpr std::array kFields{FieldDeclaration{"axis", nvinfer1::PluginFieldType::kINT32, 1},
                                        FieldDeclaration{"eps", nvinfer1::PluginFieldType::kFLOAT32, 1}};
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    explicit L2NormalizePlugin(L2NormalizeParams params) : mParams(params) {}

protected:
    void checkRank(int32_t rank) const override;
    //! Register tiles and the two-pass kernel (l2normalize_kernel.h), timed by TensorRT on the build GPU.
    int32_t nbTactics() const override;
    TRT_PLUGIN_KIT_CONFIGURE_HOOK
    TRT_PLUGIN_KIT_RUNTIME_HOOKS

private:
    L2NormalizeParams mParams;
    // Launch geometry cached by onShapeChange: x viewed as [outer, length, inner].
    int64_t mOuter{0};
    int64_t mLength{0};
    int64_t mInner{0};
};

using L2NormalizeCreator = PluginCreator<L2NormalizePlugin>;

}  // namespace trt_plugin_kit
