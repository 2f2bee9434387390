// RmsNormLastAxis: y = x * rsqrt(mean(x^2 over the last axis) + eps) * weight (RMSNorm of LLaMA & co.).
// Inputs x (rank 1 to 8) and weight ([H], x's type); FP32, FP16, BF16; FP32 accumulation. Field: eps.
// Nine tactics, ten on sm_90+, timed by TensorRT on the build GPU (rms_norm_kernel.h's layouts): the row
// held in registers by 32, 64, 128, 256 or 1024 threads, walked twice by a warp or a block, held by resident
// blocks that walk the rows (x's loads plain or evict-first), or (sm_90+) staged by the bulk copy engine in
// a ring of shared-memory stages.
#pragma once

#include <array>

#include "../common/plugin_base.h"
#include "rms_norm_kernel.h"

namespace trt_plugin_kit
{

class RmsNormPlugin final : public PluginOf<RmsNormPlugin>
{
public:
    static constexpr char const* kName = "RmsNormLastAxis";
    static constexpr std::array kFields{FieldDeclaration{"eps", nvinfer1::PluginFieldType::kFLOAT32, 1}};
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    explicit RmsNormPlugin(float eps) : mEps(eps) {}

protected:
    int32_t nbInputs() const override { return 2; }
    int32_t nbOutputs() const override { return 1; }
    TRT_PLUGIN_KIT_BUILD_HOOKS
    TRT_PLUGIN_KIT_CONFIGURE_HOOK
    TRT_PLUGIN_KIT_RUNTIME_HOOKS
    // Tactic t >= 1: layout t - 1 (rms_norm_kernel.h); 0 (not timed): by the row length.
    int32_t nbTactics() const override;
    void selectTactic(int32_t tactic) override { mTactic = tactic; }

private:
    RmsNormLayout layout() const;

    float mEps;
    int32_t mTactic{0};
    int64_t mRows{0};    // x viewed as [rows, length]
    int64_t mLength{0};  // H
    int64_t mElementBytes{4};
};

using RmsNormCreator = PluginCreator<RmsNormPlugin>;

}  // namespace trt_plugin_kit
