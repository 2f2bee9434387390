#include "plugin_base.h"

namespace trt_plugin_kit
{
using namespace nvinfer1;

IPluginCapability* PluginBase::getCapabilityInterface(PluginCapabilityType type) noexcept
{
    switch (type)
    {
        case PluginCapabilityType::kCORE:
            return static_cast<IPluginV3OneCore*>(this);
        case PluginCapabilityType::kBUILD:
            return static_cast<IPluginV3OneBuild*>(this);
        case PluginCapabilityType::kRUNTIME:
            return static_cast<IPluginV3OneRuntime*>(this);
    }
    logError(concat(mName, "::getCapabilityInterface: unknown capability type ", static_cast<int32_t>(type)));
    return nullptr;
}

IPluginV3* PluginBase::clone() noexcept
{
    return guarded<IPluginV3*>(mName, "clone", nullptr, [&] { return cloneImpl().release(); });
}

int32_t PluginBase::getOutputDataTypes(DataType* outputTypes, int32_t nbOutputs_, DataType const* inputTypes,
                                       int32_t nbInputs_) const noexcept
{
    return guarded<int32_t>(mName, "getOutputDataTypes", -1,
                            [&]
                            {
                                check(nbInputs_ == nbInputs() && nbOutputs_ == nbOutputs(), "expected ",
                                      nbInputs(), " inputs and ", nbOutputs(), " outputs, got ", nbInputs_,
                                      " and ", nbOutputs_);
                                check(outputTypes != nullptr && inputTypes != nullptr, "null type array");
                                outputDataTypes(outputTypes, inputTypes);
                                return 0;
                            });
}

int32_t PluginBase::getOutputShapes(DimsExprs const* inputs, int32_t nbInputs_,
                                    DimsExprs const* /*shapeInputs*/, int32_t nbShapeInputs,
                                    DimsExprs* outputs, int32_t nbOutputs_,
                                    IExprBuilder& exprBuilder) noexcept
{
    return guarded<int32_t>(
        mName, "getOutputShapes", -1,
        [&]
        {
            check(nbInputs_ == nbInputs() && nbOutputs_ == nbOutputs(), "expected ", nbInputs(),
                  " inputs and ", nbOutputs(), " outputs, got ", nbInputs_, " and ", nbOutputs_);
            check(nbShapeInputs == 0, "shape inputs are not supported, got ", nbShapeInputs);
            check(inputs != nullptr && outputs != nullptr, "null dims array");
            outputShapes(inputs, outputs, exprBuilder);
            return 0;
        });
}

bool PluginBase::supportsFormatCombination(int32_t pos, DynamicPluginTensorDesc const* inOut,
                                           int32_t nbInputs_, int32_t nbOutputs_) noexcept
{
    return guarded<bool>(mName, "supportsFormatCombination", false,
                         [&]
                         {
                             check(nbInputs_ == nbInputs() && nbOutputs_ == nbOutputs(), "expected ",
                                   nbInputs(), " inputs and ", nbOutputs(), " outputs, got ", nbInputs_,
                                   " and ", nbOutputs_);
                             check(inOut != nullptr && pos >= 0 && pos < nbInputs_ + nbOutputs_, "position ",
                                   pos, " out of range");
                             // supportsFormat sees plain descriptions; TensorRT fills desc for every position
                             // <= pos.
                             PluginTensorDesc descs[8];
                             check(nbInputs_ + nbOutputs_ <= 8, "too many tensors");
                             for (int32_t i = 0; i <= pos; ++i)
                             {
                                 descs[i] = inOut[i].desc;
                             }
                             return supportsFormat(pos, descs);
                         });
}

int32_t PluginBase::configurePlugin(DynamicPluginTensorDesc const* in, int32_t nbInputs_,
                                    DynamicPluginTensorDesc const* out, int32_t nbOutputs_) noexcept
{
    return guarded<int32_t>(mName, "configurePlugin", -1,
                            [&]
                            {
                                check(nbInputs_ == nbInputs() && nbOutputs_ == nbOutputs(), "expected ",
                                      nbInputs(), " inputs and ", nbOutputs(), " outputs, got ", nbInputs_,
                                      " and ", nbOutputs_);
                                check(in != nullptr && out != nullptr, "null tensor descriptions");
                                configure(in, out);
                                return 0;
                            });
}

size_t PluginBase::getWorkspaceSize(DynamicPluginTensorDesc const* inputs, int32_t nbInputs_,
                                    DynamicPluginTensorDesc const* outputs, int32_t nbOutputs_) const noexcept
{
    return guarded<size_t>(mName, "getWorkspaceSize", 0,
                           [&]
                           {
                               check(nbInputs_ == nbInputs() && nbOutputs_ == nbOutputs(), "expected ",
                                     nbInputs(), " inputs and ", nbOutputs(), " outputs, got ", nbInputs_,
                                     " and ", nbOutputs_);
                               return workspaceSize(inputs, outputs);
                           });
}

int32_t PluginBase::getNbTactics() noexcept
{
    return guarded<int32_t>(mName, "getNbTactics", 0, [&] { return nbTactics(); });
}

int32_t PluginBase::getValidTactics(int32_t* tactics, int32_t nbTactics_) noexcept
{
    return guarded<int32_t>(mName, "getValidTactics", -1,
                            [&]
                            {
                                check(nbTactics_ == nbTactics() && (nbTactics_ == 0 || tactics != nullptr),
                                      "asked for ", nbTactics_, " tactics, the plugin has ", nbTactics());
                                for (int32_t i = 0; i < nbTactics_; ++i)
                                {
                                    tactics[i] = i + 1;
                                }
                                return 0;
                            });
}

int32_t PluginBase::setTactic(int32_t tactic) noexcept
{
    return guarded<int32_t>(mName, "setTactic", -1,
                            [&]
                            {
                                check(tactic >= 0 && tactic <= nbTactics(), "tactic ", tactic,
                                      " is not one of 0..", nbTactics());
                                selectTactic(tactic);
                                mNvtxLabel.set(mName, tactic);
                                return 0;
                            });
}

int32_t PluginBase::onShapeChange(PluginTensorDesc const* in, int32_t nbInputs_, PluginTensorDesc const* out,
                                  int32_t nbOutputs_) noexcept
{
    return guarded<int32_t>(mName, "onShapeChange", -1,
                            [&]
                            {
                                check(nbInputs_ == nbInputs() && nbOutputs_ == nbOutputs(), "expected ",
                                      nbInputs(), " inputs and ", nbOutputs(), " outputs, got ", nbInputs_,
                                      " and ", nbOutputs_);
                                check(in != nullptr && out != nullptr, "null tensor descriptions");
                                shapeChanged(in, out);
                                return 0;
                            });
}

int32_t PluginBase::enqueue(PluginTensorDesc const* inputDesc, PluginTensorDesc const* outputDesc,
                            void const* const* inputs, void* const* outputs, void* workspace,
                            cudaStream_t stream) noexcept
{
    // No checks that throw here: shapes were validated in onShapeChange. The guard is the last line of
    // defence so that nothing ever crosses the ABI.
    NvtxRange const range(mNvtxLabel);
    return guarded<int32_t>(
        mName, "enqueue", -1,
        [&]
        {
            int32_t const status = enqueueImpl(inputDesc, outputDesc, inputs, outputs, workspace, stream);
            if (status != 0)
            {
                logError(concat(mName, "::enqueue failed with status ", status, " (",
                                cudaGetErrorString(static_cast<cudaError_t>(status)), ")"));
            }
            return status;
        });
}

IPluginV3* PluginBase::attachToContext(IPluginResourceContext* context) noexcept
{
    return guarded<IPluginV3*>(mName, "attachToContext", nullptr,
                               [&]
                               {
                                   std::unique_ptr<PluginBase> attached = cloneImpl();
                                   attached->attach(context);
                                   return static_cast<IPluginV3*>(attached.release());
                               });
}

PluginFieldCollection const* PluginBase::getFieldsToSerialize() noexcept
{
    return guarded<PluginFieldCollection const*>(mName, "getFieldsToSerialize", nullptr,
                                                 [&]
                                                 {
                                                     mSerialized.clear();
                                                     serialize(mSerialized);
                                                     return mSerialized.collection();
                                                 });
}

void PluginBase::configure(DynamicPluginTensorDesc const* /*in*/, DynamicPluginTensorDesc const* /*out*/) {}

size_t PluginBase::workspaceSize(DynamicPluginTensorDesc const* /*in*/,
                                 DynamicPluginTensorDesc const* /*out*/) const
{
    return 0;
}

void PluginBase::attach(IPluginResourceContext* /*context*/) {}

IPluginV3* CreatorBase::createPlugin(char const* name, PluginFieldCollection const* fc,
                                     TensorRTPhase phase) noexcept
{
    return guarded<IPluginV3*>(
        mName, "createPlugin", nullptr,
        [&]() -> IPluginV3*
        {
            check(phase == TensorRTPhase::kBUILD || phase == TensorRTPhase::kRUNTIME, "unknown phase ",
                  static_cast<int32_t>(phase));
            (void)name;  // The layer name is TensorRT's; our messages name the plugin type.
            return create(fc, phase).release();
        });
}

}  // namespace trt_plugin_kit
