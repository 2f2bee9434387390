// FullyConnected: y[N, M] = x[N, K] . W^T + b with one cuBLASLt matmul (the bias fused into its epilogue) or,
// as tactics for serving sizes, one of the plugin's own kernels (fully_connected_kernel.h).
// Fields: weights (float32, [num_outputs, K] row-major), bias (optional float32, num_outputs values),
//         num_outputs (int32). Input [N, K] or [N, C, H, W] (flattened after the batch dimension).
// FP32 (exact FP32 compute, TF32 off) and FP16 (FP32 accumulation).
#pragma once

#include <cublasLt.h>

#include <vector>

#include "../common/device_buffer.h"
#include "../common/plugin_base.h"
#include "fully_connected_kernel.h"

namespace trt_plugin_kit
{

//! A cuBLASLt handle owned by one plugin object; a copy starts without one (see DeviceBuffer).
class CublasLtHandle
{
public:
    CublasLtHandle() = default;
    CublasLtHandle(CublasLtHandle const& /*other*/) {}
    CublasLtHandle& operator=(CublasLtHandle const&) = delete;
    ~CublasLtHandle() { release(); }
    void create();
    void release() noexcept;
    cublasLtHandle_t get() const { return mHandle; }

private:
    cublasLtHandle_t mHandle{nullptr};
};

//! The matmul description, layouts and chosen algorithm for one batch size; rebuilt by onShapeChange.
class MatmulPlan
{
public:
    MatmulPlan() = default;
    MatmulPlan(MatmulPlan const& /*other*/) {}
    MatmulPlan& operator=(MatmulPlan const&) = delete;
    ~MatmulPlan() { release(); }
    //! Picks the `rank`-th (0-based) of cuBLASLt's heuristic candidates for a workspace of at most
    //! `workspaceLimit` bytes, the last one if there are fewer. The output's rows are m elements apart.
    void build(cublasLtHandle_t handle, nvinfer1::DataType type, int64_t n, int64_t k, int64_t m,
               void const* bias, size_t workspaceLimit, int32_t rank);
    void release() noexcept;
    cublasStatus_t run(cublasLtHandle_t handle, void const* weights, void const* x, void* y, void* workspace,
                       size_t workspaceBytes, cudaStream_t stream) const;
    bool ready() const { return mDesc != nullptr; }

private:
    cublasLtMatmulDesc_t mDesc{nullptr};
    cublasLtMatrixLayout_t mWeightsLayout{nullptr};
    cublasLtMatrixLayout_t mInputLayout{nullptr};
    cublasLtMatrixLayout_t mOutputLayout{nullptr};
    cublasLtMatmulAlgo_t mAlgo{};
};

class FullyConnectedPlugin final : public PluginOf<FullyConnectedPlugin>
{
public:
    static constexpr char const* kName = "FullyConnected";
    static constexpr std::array kFields{
        FieldDeclaration{"weights", nvinfer1::PluginFieldType::kFLOAT32, -1},
        FieldDeclaration{"bias", nvinfer1::PluginFieldType::kFLOAT32, -1},
        FieldDeclaration{"num_outputs", nvinfer1::PluginFieldType::kINT32, 1}};
    static std::unique_ptr<PluginBase> fromFields(FieldReader const& fields);
    //! cuBLASLt workspace requested from TensorRT (the size NVIDIA recommends for Hopper).
    static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
    //! Tactics: cuBLASLt's heuristic candidates for the shape, asked with several workspace limits (the limit
    //! changes which kernels it proposes, e.g. split-K or not); TensorRT times them at build time. cuBLASLt's
    //! first choice at the full workspace is not always its fastest (FP32 N=4096 K=800 M=500 on an H100).
    static constexpr int32_t kCandidatesPerLimit = 8;
    static constexpr size_t kWorkspaceLimits[] = {kWorkspaceBytes, size_t{4} << 20, size_t{1} << 20, 0};
    static constexpr int32_t kCublasTactics = kCandidatesPerLimit * 4;
    //! Tactics kCublasTactics + 1 and up: the plugin's own kernels (fully_connected_kernel.h), in FcKernel
    //! order. Where one does not apply (FP32 on tensor cores, an odd FP16 K), it runs cuBLASLt's first
    //! choice.
    static constexpr int32_t kOwnKernelTactics = static_cast<int32_t>(FcKernel::kCount);
    //! Then the padded-output tactics: cuBLASLt's first kCandidatesPerLimit candidates (full workspace) for a
    //! product with M rounded up to a multiple of kPaddedPitchBytes[i] (the extra weight rows are zeros),
    //! written into the workspace and packed into y by one more kernel. Hopper's fastest cuBLASLt kernels
    //! (TMA copies) need 16-byte row strides, and y[N, 500] FP16 has 1000-byte rows; cuBLASLt then also wants
    //! M itself aligned (measured: M = 500 at a 504 pitch still ran the sm_80 kernel). Where M is already
    //! such a multiple, or the padded product would exceed kMaxPaddedOutputBytes, the tactic writes y
    //! directly.
    static constexpr int64_t kPaddedPitchBytes[] = {16, 128};
    //! The device weights and bias are stored with their rows (M) rounded up to this, zeros beyond M, which
    //! covers every padded pitch in either type.
    static constexpr int64_t kStoredRowsMultiple = 64;
    static constexpr int32_t kPaddedTactics = kCandidatesPerLimit * 2;
    static constexpr size_t kMaxPaddedOutputBytes = size_t{64} << 20;
    static constexpr int32_t kTactics = kCublasTactics + kOwnKernelTactics + kPaddedTactics;

    FullyConnectedPlugin(std::vector<float> weights, std::vector<float> bias, int32_t numOutputs);

protected:
    int32_t nbInputs() const override { return 1; }
    int32_t nbOutputs() const override { return 1; }
    TRT_PLUGIN_KIT_BUILD_HOOKS
    TRT_PLUGIN_KIT_CONFIGURE_HOOK
    size_t workspaceSize(nvinfer1::DynamicPluginTensorDesc const* in,
                         nvinfer1::DynamicPluginTensorDesc const* out) const override;
    void attach(nvinfer1::IPluginResourceContext* context) override;
    TRT_PLUGIN_KIT_RUNTIME_HOOKS
    int32_t nbTactics() const override { return kTactics; }
    void selectTactic(int32_t tactic) override;

private:
    void checkInputDims(nvinfer1::Dims const& dims) const;
    void createResources();
    void uploadParameters(nvinfer1::DataType type);
    void buildPlan(int64_t n);
    //! M rounded up to kStoredRowsMultiple: the rows of mDeviceWeights's matrix and bias.
    int64_t storedRows() const;
    //! The bias's byte offset in mDeviceWeights (256-byte aligned, as cuBLASLt's epilogues prefer).
    size_t biasOffset(size_t elementBytes) const;
    void const* deviceBias() const;

    std::vector<float> mWeights;  // [M, K] row-major
    std::vector<float> mBias;     // empty or [M]
    int32_t mNumOutputs;          // M
    int64_t mK;

    // Per-execution-context resources (created in attachToContext, released by the destructor).
    CublasLtHandle mHandle;
    DeviceBuffer mDeviceWeights;  // W then bias, in the I/O type, each with storedRows() rows
    bool mUploaded{false};
    nvinfer1::DataType mUploadedType{nvinfer1::DataType::kFLOAT};
    MatmulPlan mPlan;
    int64_t mPlannedN{-1};
    int32_t mTactic{0};  // 0: cuBLASLt's first heuristic choice
    bool mOwnKernel{false};
    FcKernel mKernel{FcKernel::kDot1x8};
    int64_t mOutputPitch{0};  // elements between the rows cuBLASLt writes; > M: padded, in the workspace
};

using FullyConnectedCreator = PluginCreator<FullyConnectedPlugin>;

}  // namespace trt_plugin_kit
