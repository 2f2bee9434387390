// FlashAttentionTriton: o = softmax(q . k^T * scale [causal]) . v over [B, H, S, D], one OpenAI Triton kernel
// (kernel.py, compiled ahead of time into the library) with the online softmax: no S x S matrix in memory,
// FP32 accumulation. Inputs q [B, H, S_q, D], k and v [B, H, S_kv, D], one type (FP32, FP16, BF16); D one
// of 16, 32, 64, 128. Fields: causal (0/1), scale (optional; not set: 1 / sqrt(D)). Tactics: kernel.py's
// TACTICS, launch shapes of the FP16/BF16 kernels at D = 64 and 128, timed by TensorRT on the build GPU.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "../common/plugin_base.h"
#include "../common/triton_kernel.h"

namespace trt_plugin_kit
{

class FlashAttentionPlugin final : public PluginOf<FlashAttentionPlugin>
{
public:
    static constexpr char const* kName = "FlashAttentionTriton";
    static constexpr std::array kFields{FieldDeclaration{"causal", nvinfer1::PluginFieldType::kINT32, 1},
                                        FieldDeclaration{"scale", nvinfer1::PluginFieldType::kFLOAT32, 1}};
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    FlashAttentionPlugin(bool causal, std::optional<float> scale);

    // What kernel.py compiles (its HEAD_SIZES) and the grid allows; the spec's inputs say the same.
    static constexpr std::array<int64_t, 4> kHeadSizes{16, 32, 64, 128};
    static constexpr int64_t kMaxSequence = 16384;
    static constexpr int64_t kMaxBatchHeads = 65535;  // the grid's second dimension

protected:
    int32_t nbInputs() const override { return 3; }
    int32_t nbOutputs() const override { return 1; }
    TRT_PLUGIN_KIT_BUILD_HOOKS
    TRT_PLUGIN_KIT_CONFIGURE_HOOK
    void attach(nvinfer1::IPluginResourceContext* context) override;
    TRT_PLUGIN_KIT_RUNTIME_HOOKS
    //! kernel.py's TACTICS (the most any (type, D) has); a tactic a (type, D) lacks runs the default.
    int32_t nbTactics() const override { return mTacticCount; }
    void selectTactic(int32_t tactic) override;

private:
    void plan();
    TritonKernel const& chosenKernel() const;

    bool mCausal;
    std::optional<float> mScale;  // not set: 1 / sqrt(D)
    // kernel.py's variants {fp32, fp16, bf16} x D {16, 32, 64, 128}, index = 4 * type + head size's index.
    std::array<TritonKernel, 12> mKernels;
    // Per default variant, its tactics' variants (<dtype>_d<D>_t<i>) in TACTICS' order; empty for most.
    std::array<std::vector<TritonKernel>, 12> mTacticKernels;
    int32_t mTacticCount{0};
    int32_t mTactic{0};         // 0: the default variant; t: TACTICS[D][t - 1] where it exists and fits
    int32_t mChosen{-1};        // the default variant of the shapes' (type, D); -1: no shapes yet
    int32_t mChosenTactic{-1};  // the index into mTacticKernels[mChosen] that runs; -1: the default
    int32_t mTypeHead{-1};      // the default variant the shapes' (type, D) name; -1: no shapes yet
    dim3 mGrid{0, 0, 0};        // cdiv(S_q, BLOCK_M) x B * H programs
    int64_t mBatchHeads{0};
    int32_t mSeqQ{0};
    int32_t mSeqKv{0};
    float mRunScale{0.F};  // the scale the launch passes
};

using FlashAttentionCreator = PluginCreator<FlashAttentionPlugin>;

}  // namespace trt_plugin_kit
