#include "fully_connected_plugin.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "../common/tensor.h"

namespace trt_plugin_kit
{
using namespace nvinfer1;

namespace
{
void checkCublas(cublasStatus_t status, char const* what)
{
    check(status == CUBLAS_STATUS_SUCCESS, what, " failed with cuBLAS status ", static_cast<int32_t>(status));
}

cudaDataType_t cudaType(DataType type)
{
    return type == DataType::kHALF ? CUDA_R_16F : CUDA_R_32F;
}

bool isFloat(DataType type)
{
    return type == DataType::kFLOAT || type == DataType::kHALF;
}

template <typename T>
T roundUp(T value, T multiple)
{
    return (value + multiple - 1) / multiple * multiple;
}

//! Bytes of workspace the padded-output tactics may use for `rows` rows of `m` outputs of `elementBytes`:
//! the widest padded pitch, capped (the tactics write y directly beyond the cap), 256-byte aligned.
size_t paddedOutputReserve(int64_t rows, int64_t m, size_t elementBytes)
{
    if (rows <= 0)
    {
        return 0;
    }
    int64_t const widest =
        FullyConnectedPlugin::kPaddedPitchBytes[std::size(FullyConnectedPlugin::kPaddedPitchBytes) - 1];
    auto const pitchBytes = static_cast<size_t>(roundUp(m * static_cast<int64_t>(elementBytes), widest));
    size_t const wanted = static_cast<size_t>(rows) > FullyConnectedPlugin::kMaxPaddedOutputBytes / pitchBytes
                              ? FullyConnectedPlugin::kMaxPaddedOutputBytes
                              : static_cast<size_t>(rows) * pitchBytes;
    return roundUp(wanted, size_t{256});
}
}  // namespace

void CublasLtHandle::create()
{
    if (mHandle == nullptr)
    {
        checkCublas(cublasLtCreate(&mHandle), "cublasLtCreate");
    }
}

void CublasLtHandle::release() noexcept
{
    if (mHandle != nullptr)
    {
        cublasLtDestroy(mHandle);
        mHandle = nullptr;
    }
}

void MatmulPlan::build(cublasLtHandle_t handle, DataType type, int64_t n, int64_t k, int64_t m,
                       void const* bias, size_t workspaceLimit, int32_t rank)
{
    release();
    cudaDataType_t const dataType = cudaType(type);
    // Row-major y[N,M] = x[N,K] . W[M,K]^T is, in cuBLAS's column-major terms, Y(MxN) = op(W)(MxK) . X(KxN)
    // with W stored KxM (ld K, transposed) and X stored KxN (ld K).
    checkCublas(cublasLtMatmulDescCreate(&mDesc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    cublasOperation_t const transposed = CUBLAS_OP_T;
    checkCublas(
        cublasLtMatmulDescSetAttribute(mDesc, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed)),
        "set TRANSA");
    if (bias != nullptr)
    {
        cublasLtEpilogue_t const epilogue = CUBLASLT_EPILOGUE_BIAS;
        checkCublas(
            cublasLtMatmulDescSetAttribute(mDesc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
            "set EPILOGUE");
        checkCublas(
            cublasLtMatmulDescSetAttribute(mDesc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
            "set BIAS_POINTER");
    }
    checkCublas(cublasLtMatrixLayoutCreate(&mWeightsLayout, dataType, k, m, k), "layout W");
    checkCublas(cublasLtMatrixLayoutCreate(&mInputLayout, dataType, k, n, k), "layout X");
    checkCublas(cublasLtMatrixLayoutCreate(&mOutputLayout, dataType, m, n, m), "layout Y");

    cublasLtMatmulPreference_t preference = nullptr;
    checkCublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    cublasLtMatmulHeuristicResult_t results[FullyConnectedPlugin::kCandidatesPerLimit]{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceLimit, sizeof(workspaceLimit));
    if (status == CUBLAS_STATUS_SUCCESS)
    {
        status = cublasLtMatmulAlgoGetHeuristic(handle, mDesc, mWeightsLayout, mInputLayout, mOutputLayout,
                                                mOutputLayout, preference,
                                                FullyConnectedPlugin::kCandidatesPerLimit, results, &found);
    }
    cublasLtMatmulPreferenceDestroy(preference);
    checkCublas(status, "cublasLtMatmulAlgoGetHeuristic");
    check(found > 0, "cuBLASLt has no algorithm for N=", n, " K=", k, " M=", m);
    mAlgo = results[std::min(rank, found - 1)].algo;
}

void MatmulPlan::release() noexcept
{
    if (mOutputLayout) cublasLtMatrixLayoutDestroy(mOutputLayout);
    if (mInputLayout) cublasLtMatrixLayoutDestroy(mInputLayout);
    if (mWeightsLayout) cublasLtMatrixLayoutDestroy(mWeightsLayout);
    if (mDesc) cublasLtMatmulDescDestroy(mDesc);
    mOutputLayout = mInputLayout = mWeightsLayout = nullptr;
    mDesc = nullptr;
}

cublasStatus_t MatmulPlan::run(cublasLtHandle_t handle, void const* weights, void const* x, void* y,
                               void* workspace, size_t workspaceBytes, cudaStream_t stream) const
{
    float const alpha = 1.F;
    float const beta = 0.F;
    return cublasLtMatmul(handle, mDesc, &alpha, weights, mWeightsLayout, x, mInputLayout, &beta, y,
                          mOutputLayout, y, mOutputLayout, &mAlgo, workspace, workspaceBytes, stream);
}

FullyConnectedPlugin::FullyConnectedPlugin(std::vector<float> weights, std::vector<float> bias,
                                           int32_t numOutputs)
    : mWeights(std::move(weights)),
      mBias(std::move(bias)),
      mNumOutputs(numOutputs),
      mK(static_cast<int64_t>(mWeights.size()) / numOutputs)
{
}

void FullyConnectedPlugin::outputDataTypes(DataType* outputTypes, DataType const* inputTypes) const
{
    check(isFloat(inputTypes[0]), "input type ", dataTypeName(inputTypes[0]),
          " is not supported (FP32 or FP16)");
    outputTypes[0] = inputTypes[0];
}

void FullyConnectedPlugin::checkInputDims(Dims const& dims) const
{
    check(dims.nbDims >= 2, "input must be [N, K] or [N, C, H, W], got rank ", dims.nbDims);
    bool known = true;
    for (int32_t i = 1; i < dims.nbDims; ++i)
    {
        known = known && dims.d[i] >= 0;
    }
    if (known)
    {
        int64_t const k = volume(dims, 1);
        check(k == mK, "input ", dimsToString(dims), " flattens to K=", k, " but the weights are [",
              mNumOutputs, ", ", mK, "]");
    }
}

void FullyConnectedPlugin::outputShapes(DimsExprs const* inputs, DimsExprs* outputs,
                                        IExprBuilder& exprBuilder) const
{
    DimsExprs const& in = inputs[0];
    check(in.nbDims >= 2, "input must be [N, K] or [N, C, H, W], got rank ", in.nbDims);
    bool constant = true;
    int64_t k = 1;
    for (int32_t i = 1; i < in.nbDims; ++i)
    {
        constant = constant && in.d[i]->isConstant();
        k *= constant ? in.d[i]->getConstantValue() : 1;
    }
    check(!constant || k == mK, "input flattens to K=", k, " but the weights have K=", mK);
    outputs[0].nbDims = 2;
    outputs[0].d[0] = in.d[0];
    outputs[0].d[1] = exprBuilder.constant(mNumOutputs);
}

bool FullyConnectedPlugin::supportsFormat(int32_t pos, PluginTensorDesc const* inOut) const
{
    PluginTensorDesc const& desc = inOut[pos];
    if (desc.format != TensorFormat::kLINEAR)
    {
        return false;
    }
    return pos == 0 ? isFloat(desc.type) : desc.type == inOut[0].type;
}

void FullyConnectedPlugin::configure(DynamicPluginTensorDesc const* in,
                                     DynamicPluginTensorDesc const* /*out*/)
{
    checkInputDims(in[0].desc.dims);
    check(isFloat(in[0].desc.type), "input type ", dataTypeName(in[0].desc.type), " is not supported");
}

size_t FullyConnectedPlugin::workspaceSize(DynamicPluginTensorDesc const* in,
                                           DynamicPluginTensorDesc const* /*out*/) const
{
    // cuBLASLt's workspace, then room for the padded-output tactics' product at the profile's largest batch.
    DataType const type = in[0].desc.type;
    return kWorkspaceBytes +
           (isFloat(type) ? paddedOutputReserve(in[0].max.d[0], mNumOutputs, elementSize(type)) : 0);
}

void FullyConnectedPlugin::createResources()
{
    mHandle.create();
    if (mDeviceWeights.empty())
    {
        // Sized for FP32 so that the same buffer holds the parameters in either I/O type.
        mDeviceWeights.allocate(biasOffset(sizeof(float)) +
                                static_cast<size_t>(storedRows()) * sizeof(float));
        mUploaded = false;
    }
}

void FullyConnectedPlugin::attach(IPluginResourceContext* /*context*/)
{
    createResources();
}

void FullyConnectedPlugin::uploadParameters(DataType type)
{
    // Weights are converted to the I/O type and uploaded once per instance (the type never changes for a
    // built engine), not per enqueue. The runtime only learns the type here, as configurePlugin is
    // build-only.
    size_t const elementBytes = elementSize(type);
    // Zeros beyond M rows: the padded tactics' extra outputs are computed and dropped.
    std::vector<char> host(biasOffset(elementBytes) + static_cast<size_t>(storedRows()) * elementBytes, 0);
    auto const put = [&](std::vector<float> const& values, size_t offset)
    {
        for (size_t i = 0; i < values.size(); ++i)
        {
            char* to = host.data() + offset + i * elementBytes;
            if (type == DataType::kHALF)
            {
                __half const value = __float2half_rn(values[i]);
                std::memcpy(to, &value, sizeof(value));
            }
            else
            {
                std::memcpy(to, &values[i], sizeof(float));
            }
        }
    };
    put(mWeights, 0);
    put(mBias, biasOffset(elementBytes));
    mDeviceWeights.upload(host.data(), host.size());
    mUploaded = true;
    mUploadedType = type;
    mPlannedN = -1;  // The bias pointer's element type changed: rebuild the plan.
}

int64_t FullyConnectedPlugin::storedRows() const
{
    return roundUp(static_cast<int64_t>(mNumOutputs), kStoredRowsMultiple);
}

size_t FullyConnectedPlugin::biasOffset(size_t elementBytes) const
{
    return roundUp(static_cast<size_t>(storedRows() * mK) * elementBytes, size_t{256});
}

void const* FullyConnectedPlugin::deviceBias() const
{
    return mBias.empty()
               ? nullptr
               : static_cast<char const*>(mDeviceWeights.data()) + biasOffset(elementSize(mUploadedType));
}

void FullyConnectedPlugin::buildPlan(int64_t n)
{
    int32_t const ownEnd = kCublasTactics + kOwnKernelTactics;
    // Own-kernel tactics keep cuBLASLt's first choice as the fallback for problems their kernel does not
    // take.
    mOwnKernel = mTactic > kCublasTactics && mTactic <= ownEnd;
    mKernel = static_cast<FcKernel>(mOwnKernel ? mTactic - kCublasTactics - 1 : 0);
    int32_t index =
        mTactic > 0 && mTactic <= kCublasTactics ? mTactic - 1 : 0;  // into the cuBLASLt candidates
    mOutputPitch = mNumOutputs;
    if (mTactic > ownEnd)
    {
        int32_t const padded = mTactic - ownEnd - 1;
        index = padded % kCandidatesPerLimit;  // at the first (full) workspace limit
        auto const elementBytes = static_cast<int64_t>(elementSize(mUploadedType));
        int64_t const pitch =
            roundUp(mNumOutputs * elementBytes, kPaddedPitchBytes[padded / kCandidatesPerLimit]) /
            elementBytes;
        // Fits in what workspaceSize reserved (n <= the profile's maximum), or else writes y directly
        // (divided, not multiplied: n may be anything a caller passes).
        auto const pitchBytes = static_cast<size_t>(pitch * elementBytes);
        if (pitch != mNumOutputs &&
            static_cast<size_t>(n) <=
                paddedOutputReserve(n, mNumOutputs, static_cast<size_t>(elementBytes)) / pitchBytes)
        {
            mOutputPitch = pitch;
        }
    }
    // A padded product computes all mOutputPitch outputs (the weight rows beyond M are zeros).
    mPlan.build(mHandle.get(), mUploadedType, n, mK, mOutputPitch, deviceBias(),
                kWorkspaceLimits[index / kCandidatesPerLimit], index % kCandidatesPerLimit);
    mPlannedN = n;
}

void FullyConnectedPlugin::shapeChanged(PluginTensorDesc const* in, PluginTensorDesc const* out)
{
    checkInputDims(in[0].dims);
    DataType const type = in[0].type;
    check(isFloat(type) && out[0].type == type, "unsupported types ", dataTypeName(type), " -> ",
          dataTypeName(out[0].type));
    int64_t const n = in[0].dims.d[0];
    check(out[0].dims.nbDims == 2 && out[0].dims.d[0] == n && out[0].dims.d[1] == mNumOutputs, "output ",
          dimsToString(out[0].dims), " is not [", n, ", ", mNumOutputs, "]");
    createResources();  // No-op after attachToContext; covers build-time timing on an unattached plugin.
    if (!mUploaded || mUploadedType != type)
    {
        uploadParameters(type);
    }
    if (n != mPlannedN && n > 0)
    {
        buildPlan(n);
    }
}

int32_t FullyConnectedPlugin::enqueueImpl(PluginTensorDesc const* inputDesc,
                                          PluginTensorDesc const* /*outputDesc*/, void const* const* inputs,
                                          void* const* outputs, void* workspace, cudaStream_t stream)
{
    if (inputDesc[0].dims.d[0] == 0)
    {
        return 0;
    }
    if (!mPlan.ready() || mPlannedN != inputDesc[0].dims.d[0] || workspace == nullptr)
    {
        return cudaErrorNotReady;  // onShapeChange did not run (or failed) for this shape.
    }
    if (mOwnKernel)
    {
        cudaError_t const launched =
            launchFcKernel(mKernel, elementType(mUploadedType), inputs[0], mDeviceWeights.data(),
                           deviceBias(), outputs[0], mPlannedN, mK, mNumOutputs, stream);
        if (launched != cudaErrorNotSupported)
        {
            return launched;
        }
    }
    bool const padded = mOutputPitch != mNumOutputs;
    // A padded product goes to the workspace after cuBLASLt's own part (workspaceSize reserved it).
    void* const product = padded ? static_cast<char*>(workspace) + kWorkspaceBytes : outputs[0];
    cublasStatus_t const status = mPlan.run(mHandle.get(), mDeviceWeights.data(), inputs[0], product,
                                            workspace, kWorkspaceBytes, stream);
    if (status != CUBLAS_STATUS_SUCCESS)
    {
        return static_cast<int32_t>(cudaErrorLaunchFailure);
    }
    if (!padded)
    {
        return 0;
    }
    auto const elementBytes = static_cast<int64_t>(elementSize(mUploadedType));
    return launchPackRows(product, mOutputPitch * elementBytes, outputs[0], mNumOutputs * elementBytes,
                          mPlannedN, stream);
}

void FullyConnectedPlugin::selectTactic(int32_t tactic)
{
    if (tactic == mTactic)
    {
        return;
    }
    mTactic = tactic;
    // TensorRT may call setTactic after onShapeChange: rebuild the plan now, so enqueue never has to.
    if (mPlan.ready() && mPlannedN > 0)
    {
        int64_t const n = mPlannedN;
        mPlannedN = -1;
        buildPlan(n);
    }
    else
    {
        mPlannedN = -1;
    }
}

void FullyConnectedPlugin::serialize(FieldWriter& writer) const
{
    writer.addFloats("weights", mWeights);
    if (!mBias.empty())
    {
        writer.addFloats("bias", mBias);
    }
    writer.addInt("num_outputs", mNumOutputs);
}

std::unique_ptr<PluginBase> FullyConnectedPlugin::fromFields(FieldReader const& fields)
{
    int32_t const numOutputs = fields.requireInt("num_outputs");
    check(numOutputs > 0, "num_outputs must be > 0, got ", numOutputs);
    std::vector<float> weights = fields.requireFloats("weights");
    check(weights.size() % static_cast<size_t>(numOutputs) == 0, "weights has ", weights.size(),
          " values, not a multiple of num_outputs=", numOutputs);
    std::vector<float> bias = fields.getFloats("bias").value_or(std::vector<float>{});
    check(bias.empty() || bias.size() == static_cast<size_t>(numOutputs), "bias has ", bias.size(),
          " values but num_outputs=", numOutputs);
    return std::make_unique<FullyConnectedPlugin>(std::move(weights), std::move(bias), numOutputs);
}

TRT_PLUGIN_KIT_REGISTER_CREATOR(FullyConnectedCreator);

}  // namespace trt_plugin_kit
