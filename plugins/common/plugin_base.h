// Base classes that hold the IPluginV3 boilerplate once for every plugin of the library.
//
// Plugins implement the *Impl hooks below and may throw PluginError (or anything else) from them; the
// `noexcept` TensorRT overrides here catch everything, log it through TensorRT's logger with the plugin
// and call names, and return TensorRT's error value (-1, false or nullptr). Nothing crosses the ABI.
#pragma once

#include <NvInferRuntime.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "checks.h"
#include "fields.h"
#include "logging.h"
#include "nvtx_range.h"
#include "registration.h"

namespace trt_plugin_kit
{

//! The one namespace every plugin of this library registers under (documented in plugins/README.md).
constexpr char const* kPluginNamespace = "trt_plugin_kit";
//! Every plugin of this library is at version "1".
constexpr char const* kPluginVersion = "1";

//! Runs `body`, returning its value, or `onError` after logging whatever it threw.
template <typename Result, typename Body>
Result guarded(char const* plugin, char const* call, Result onError, Body&& body) noexcept
{
    try
    {
        return body();
    }
    catch (std::exception const& e)
    {
        logError(concat(plugin, "::", call, ": ", e.what()));
    }
    catch (...)
    {
        logError(concat(plugin, "::", call, ": unknown exception"));
    }
    return onError;
}

class PluginBase : public nvinfer1::IPluginV3,
                   public nvinfer1::IPluginV3OneCore,
                   public nvinfer1::IPluginV3OneBuild,
                   public nvinfer1::IPluginV3OneRuntime
{
public:
    ~PluginBase() override = default;

    // IPluginV3
    nvinfer1::IPluginCapability* getCapabilityInterface(
        nvinfer1::PluginCapabilityType type) noexcept override;
    nvinfer1::IPluginV3* clone() noexcept override;

    // IPluginV3OneCore
    char const* getPluginName() const noexcept override { return mName; }
    char const* getPluginVersion() const noexcept override { return kPluginVersion; }
    char const* getPluginNamespace() const noexcept override { return kPluginNamespace; }

    // IPluginV3OneBuild
    int32_t getNbOutputs() const noexcept override { return nbOutputs(); }
    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
                               nvinfer1::DataType const* inputTypes,
                               int32_t nbInputs) const noexcept override;
    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
                            nvinfer1::DimsExprs const* shapeInputs, int32_t nbShapeInputs,
                            nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
                            nvinfer1::IExprBuilder& exprBuilder) noexcept override;
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut,
                                   int32_t nbInputs, int32_t nbOutputs) noexcept override;
    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
                            nvinfer1::DynamicPluginTensorDesc const* out,
                            int32_t nbOutputs) noexcept override;
    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
                            nvinfer1::DynamicPluginTensorDesc const* outputs,
                            int32_t nbOutputs) const noexcept override;
    int32_t getNbTactics() noexcept override;
    int32_t getValidTactics(int32_t* tactics, int32_t nbTactics) noexcept override;

    // IPluginV3OneRuntime
    int32_t setTactic(int32_t tactic) noexcept override;
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs,
                          nvinfer1::PluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
                    void const* const* inputs, void* const* outputs, void* workspace,
                    cudaStream_t stream) noexcept override;
    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* context) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override;

protected:
    explicit PluginBase(char const* name) : mName(name) { mNvtxLabel.set(name, 0); }
    // Clones copy the configuration, never the serialization scratch space (it points into its owner).
    PluginBase(PluginBase const& other) : mName(other.mName), mNvtxLabel(other.mNvtxLabel) {}

    // ---- hooks implemented by each plugin (may throw) ----
    virtual int32_t nbInputs() const = 0;
    virtual int32_t nbOutputs() const = 0;
    virtual std::unique_ptr<PluginBase> cloneImpl() const = 0;
    virtual void outputDataTypes(nvinfer1::DataType* outputTypes,
                                 nvinfer1::DataType const* inputTypes) const = 0;
    virtual void outputShapes(nvinfer1::DimsExprs const* inputs, nvinfer1::DimsExprs* outputs,
                              nvinfer1::IExprBuilder& exprBuilder) const = 0;
    //! Called with pos < nbInputs + nbOutputs; the formats/types of positions < pos are already chosen.
    virtual bool supportsFormat(int32_t pos, nvinfer1::PluginTensorDesc const* inOut) const = 0;
    //! Build phase: types are final, dims may hold -1 (see min/max for the range).
    virtual void configure(nvinfer1::DynamicPluginTensorDesc const* in,
                           nvinfer1::DynamicPluginTensorDesc const* out);
    virtual size_t workspaceSize(nvinfer1::DynamicPluginTensorDesc const* in,
                                 nvinfer1::DynamicPluginTensorDesc const* out) const;
    //! Runtime: dims are concrete. Validate here (not in enqueue) and cache launch parameters.
    virtual void shapeChanged(nvinfer1::PluginTensorDesc const* in,
                              nvinfer1::PluginTensorDesc const* out) = 0;
    //! Returns a cudaError_t-like status; must not allocate, synchronize or copy to/from the host.
    virtual int32_t enqueueImpl(nvinfer1::PluginTensorDesc const* inputDesc,
                                nvinfer1::PluginTensorDesc const* outputDesc, void const* const* inputs,
                                void* const* outputs, void* workspace, cudaStream_t stream) = 0;
    //! Per-execution-context resources (handles, device buffers) are created on the clone here and released
    //! in the plugin's destructor.
    virtual void attach(nvinfer1::IPluginResourceContext* context);
    virtual void serialize(FieldWriter& writer) const = 0;
    //! Tactics TensorRT times at build time (ids 1..nbTactics()); it then calls setTactic with the fastest,
    //! at build time and again on the deserialized plugin. 0 means "the plugin's default".
    virtual int32_t nbTactics() const { return 0; }
    virtual void selectTactic(int32_t tactic) { check(tactic == 0, "unknown tactic ", tactic); }

    char const* name() const { return mName; }

private:
    char const* mName;
    FieldWriter mSerialized;
    NvtxLabel mNvtxLabel;  // enqueue's NVTX range, "<name> tactic <n>" (empty unless built with NVTX)
};

//! What every plugin class derives from: PluginOf<MyPlugin> (or PluginOf<MyPlugin, UnaryFloatPlugin>) names
//! the plugin after MyPlugin::kName and clones it by copy, written once here.
template <typename Self, typename Base = PluginBase>
class PluginOf : public Base
{
protected:
    PluginOf() : Base(Self::kName) {}
    std::unique_ptr<PluginBase> cloneImpl() const override
    {
        return std::make_unique<Self>(static_cast<Self const&>(*this));
    }
};

// The hooks' declarations, written once (their contracts are on PluginBase's hooks above). A plugin class
// lists the groups it implements and defines each in its .cpp with the signature given here.
//! Build phase: output types and shapes, the accepted formats.
#define TRT_PLUGIN_KIT_BUILD_HOOKS                                                              \
    void outputDataTypes(nvinfer1::DataType* outputTypes, nvinfer1::DataType const* inputTypes) \
        const override;                                                                         \
    void outputShapes(nvinfer1::DimsExprs const* inputs, nvinfer1::DimsExprs* outputs,          \
                      nvinfer1::IExprBuilder& exprBuilder) const override;                      \
    bool supportsFormat(int32_t pos, nvinfer1::PluginTensorDesc const* inOut) const override;
//! Build phase: the chosen types and the dimension ranges, checked once.
#define TRT_PLUGIN_KIT_CONFIGURE_HOOK                           \
    void configure(nvinfer1::DynamicPluginTensorDesc const* in, \
                   nvinfer1::DynamicPluginTensorDesc const* out) override;
//! Runtime: the concrete shapes, the launch, the fields to serialize.
#define TRT_PLUGIN_KIT_RUNTIME_HOOKS                                                                         \
    void shapeChanged(nvinfer1::PluginTensorDesc const* in, nvinfer1::PluginTensorDesc const* out) override; \
    int32_t enqueueImpl(nvinfer1::PluginTensorDesc const* inputDesc,                                         \
                        nvinfer1::PluginTensorDesc const* outputDesc, void const* const* inputs,             \
                        void* const* outputs, void* workspace, cudaStream_t stream) override;                \
    void serialize(FieldWriter& writer) const override;

//! Creator base: names, field declarations, and a guarded createPlugin.
class CreatorBase : public nvinfer1::IPluginCreatorV3One
{
public:
    nvinfer1::IPluginV3* createPlugin(char const* name, nvinfer1::PluginFieldCollection const* fc,
                                      nvinfer1::TensorRTPhase phase) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override
    {
        return mFieldNames.collection();
    }
    char const* getPluginName() const noexcept override { return mName; }
    char const* getPluginVersion() const noexcept override { return kPluginVersion; }
    char const* getPluginNamespace() const noexcept override { return kPluginNamespace; }

protected:
    explicit CreatorBase(char const* name) : mName(name) {}
    //! Parses and validates the fields; throws PluginError with a message naming the bad field.
    virtual std::unique_ptr<PluginBase> create(nvinfer1::PluginFieldCollection const* fc,
                                               nvinfer1::TensorRTPhase phase) const = 0;

    FieldWriter mFieldNames;

private:
    char const* mName;
};

//! A field as the creator's getFieldNames() declares it: name, type and length as the plugin's spec.yaml
//! gives them (tests/library/test_plugin_spec.py compares the built library with the specs).
struct FieldDeclaration
{
    char const* name;
    nvinfer1::PluginFieldType type;
    int32_t length;
};

//! The creator of every plugin of the library, written once. The plugin class provides
//!     static constexpr char const* kName;                      the creator name (spec.yaml `creator`)
//!     static constexpr std::array<FieldDeclaration, N> kFields;  spec.yaml's `fields`, in order
//!     static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);  reads and checks them
//! and its header names the creator `using MyCreator = PluginCreator<MyPlugin>;`, registered in its .cpp with
//! TRT_PLUGIN_KIT_REGISTER_CREATOR(MyCreator). Field names outside kFields are logged and ignored
//! (FieldReader).
template <typename Plugin>
class PluginCreator final : public CreatorBase
{
public:
    PluginCreator() : CreatorBase(Plugin::kName)
    {
        for (FieldDeclaration const& field : Plugin::kFields)
        {
            mFieldNames.declare(field.name, field.type, field.length);
        }
    }

protected:
    std::unique_ptr<PluginBase> create(nvinfer1::PluginFieldCollection const* fc,
                                       nvinfer1::TensorRTPhase /*phase*/) const override
    {
        std::vector<std::string> known;
        for (FieldDeclaration const& field : Plugin::kFields)
        {
            known.emplace_back(field.name);
        }
        return Plugin::fromFields(FieldReader(Plugin::kName, fc, known));
    }
};

}  // namespace trt_plugin_kit
