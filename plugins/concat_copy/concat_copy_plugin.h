// ConcatCopy: the developer guide's two-in/two-out BarPlugin made concrete.
//   out0 = concat(in0, in1) along axis 0   (its first dimension is built with IExprBuilder as a sum)
//   out1 = copy of in0
// No fields. Types FP32, FP16, INT8, INT32 (both inputs the same type and rank; dims after axis 0 equal).
#pragma once

#include "../common/plugin_base.h"

namespace trt_plugin_kit
{

class ConcatCopyPlugin final : public PluginOf<ConcatCopyPlugin>
{
public:
    static constexpr char const* kName = "ConcatCopy";
    static constexpr std::array<FieldDeclaration, 0> kFields{};  // no fields
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    ConcatCopyPlugin() {}

protected:
    int32_t nbInputs() const override { return 2; }
    int32_t nbOutputs() const override { return 2; }
    TRT_PLUGIN_KIT_BUILD_HOOKS
    TRT_PLUGIN_KIT_CONFIGURE_HOOK
    TRT_PLUGIN_KIT_RUNTIME_HOOKS
    //! The copy's launch shapes (concat_copy_kernel.h), timed by TensorRT on the build GPU.
    int32_t nbTactics() const override;
    void selectTactic(int32_t tactic) override { mTactic = tactic; }

private:
    size_t mBytes0{0};
    size_t mBytes1{0};
    int32_t mTactic{0};  // 0: the default launch
};

using ConcatCopyCreator = PluginCreator<ConcatCopyPlugin>;

}  // namespace trt_plugin_kit
