// SwiGLU: y = silu(a) * b, a and b the two halves of the input's last axis (y's last axis is half as long).
// No fields. The kernel is OpenAI Triton (kernel.py), compiled ahead of time into the library.
#pragma once

#include <array>
#include <vector>

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
    //! kernel.py's launch shapes (TACTICS), timed by TensorRT on the build GPU.
    int32_t nbTactics() const override { return mShapes; }
    void selectTactic(int32_t tactic) override;

private:
    int32_t defaultShape() const;
    TritonKernel& kernelOf(int32_t shape, bool aligned);
    void plan();

    // kernel.py's variants: {fp32, fp16, bf16} x launch shapes x {16-aligned, general}, in that order.
    std::vector<TritonKernel> mKernels;
    int32_t mShapes{0};
    int32_t mTactic{0};  // 0: TACTICS[0] for wide rows, TACTICS[1] for narrow ones; t: TACTICS[t - 1]
    // The launch shape of the current shape, type and tactic; -1: no shape yet.
    int32_t mChosen{-1};
    int32_t mTypeIndex{0};  // kernel.py's dtype order: fp32, fp16, bf16
    dim3 mGrid{0, 0, 0};    // rows / BLOCK_R x half / BLOCK_C programs
    int32_t mRows{0};
    int32_t mHalf{0};
};

using SwigluCreator = PluginCreator<SwigluPlugin>;

}  // namespace trt_plugin_kit
