// Shared shape/type logic of the one-input, one-output plugins whose output has the input's shape and
// type, in FP32 or FP16, linear format (L2Normalize, PReLU, LeakyReLU). Because FP16 is accepted on both
// sides, TensorRT never has to put reformat layers around them.
#pragma once

#include "plugin_base.h"
#include "tensor.h"

namespace trt_plugin_kit
{

class UnaryFloatPlugin : public PluginBase
{
protected:
    using PluginBase::PluginBase;

    int32_t nbInputs() const override { return 1; }
    int32_t nbOutputs() const override { return 1; }

    void outputDataTypes(nvinfer1::DataType* outputTypes, nvinfer1::DataType const* inputTypes) const override
    {
        check(isFloat(inputTypes[0]), "input type ", dataTypeName(inputTypes[0]),
              " is not supported (FP32 or FP16)");
        outputTypes[0] = inputTypes[0];
    }

    void outputShapes(nvinfer1::DimsExprs const* inputs, nvinfer1::DimsExprs* outputs,
                      nvinfer1::IExprBuilder& /*exprBuilder*/) const override
    {
        checkRank(inputs[0].nbDims);
        outputs[0] = inputs[0];
    }

    bool supportsFormat(int32_t pos, nvinfer1::PluginTensorDesc const* inOut) const override
    {
        nvinfer1::PluginTensorDesc const& desc = inOut[pos];
        if (desc.format != nvinfer1::TensorFormat::kLINEAR)
        {
            return false;
        }
        return pos == 0 ? isFloat(desc.type) : desc.type == inOut[0].type;
    }

    //! Validates rank and types at runtime; returns the element count.
    int64_t checkRuntimeTensors(nvinfer1::PluginTensorDesc const* in,
                                nvinfer1::PluginTensorDesc const* out) const
    {
        checkRank(in[0].dims.nbDims);
        check(isFloat(in[0].type) && out[0].type == in[0].type, "unsupported types ",
              dataTypeName(in[0].type), " -> ", dataTypeName(out[0].type));
        int64_t const count = volume(in[0].dims);
        check(volume(out[0].dims) == count, "output ", dimsToString(out[0].dims), " does not match input ",
              dimsToString(in[0].dims));
        return count;
    }

    //! Plugin-specific rank rule (throws PluginError).
    virtual void checkRank(int32_t rank) const = 0;

    //! The highest rank of the plugins whose kernels view x as [outer, length, inner] (L2Normalize, PReLU).
    static constexpr int32_t kMaxViewRank = 8;
    static void checkViewRank(int32_t rank)
    {
        check(rank >= 1 && rank <= kMaxViewRank, "input rank ", rank, " is not supported (1 to ",
              kMaxViewRank, ")");
    }

    static bool isFloat(nvinfer1::DataType type)
    {
        return type == nvinfer1::DataType::kFLOAT || type == nvinfer1::DataType::kHALF;
    }

    //! Stores the tactic TensorRT chose (PluginBase::setTactic checked it is 0..nbTactics()); each plugin
    //! says how many it has and passes tactic() to its launcher, where 0 is the kernel's default launch.
    void selectTactic(int32_t tactic) override { mTactic = tactic; }
    int32_t tactic() const { return mTactic; }

private:
    int32_t mTactic{0};
};

}  // namespace trt_plugin_kit
