// SwiGLU: y = silu(a) * b, a and b the two halves of the input's last axis (y's last axis is half as long).
// No fields. The kernel is OpenAI Triton (kernel.py), compiled ahead of time into the library.
#pragma once

#include <array>

#include "../common/plugin_base.h"
#include "../common/triton_kernel.h"

namespace trt_plugin_kit
{

class SwigluPlugin final : public PluginOf<SwigluPlugin>
{
public:
    static constexpr char const* kName = "SwiGLUSplit";
    static constexpr std::array<FieldDeclaration, 0> kFields{};  // no fields
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    SwigluPlugin();

protected:
    int32_t nbInputs() const override { return 1; }
    int32_t nbOutputs() const override { return 1; }
    TRT_PLUGIN_KIT_BUILD_HOOKS
    TRT_PLUGIN_KIT_CONFIGURE_HOOK
    void attach(nvinfer1::IPluginResourceContext* context) override;
    TRT_PLUGIN_KIT_RUNTIME_HOOKS

private:
    // kernel.py's variants: {fp32, fp16, bf16} x {wide, narrow} x {16-aligned, general}, index = 4 * dtype
    // + 2 * narrow + general.
    std::array<TritonKernel, 12> mKernels;
    // The aligned variant of the current shape and type (the general one is mChosen + 1); -1: none yet.
    int32_t mChosen{-1};
    dim3 mGrid{0, 0, 0};  // rows / BLOCK_R x half / BLOCK_C programs
    int32_t mRows{0};
    int32_t mHalf{0};
};

using SwigluCreator = PluginCreator<SwigluPlugin>;

}  // namespace trt_plugin_kit
