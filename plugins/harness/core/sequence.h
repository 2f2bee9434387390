// Helpers for playing TensorRT's calls on a plugin, shared by plugin_harness, plugin_stress and the
// benchmark.
#pragma once

#include <NvInferRuntime.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "core/trt_fakes.h"

namespace harness
{

struct PluginDeleter
{
    void operator()(nvinfer1::IPluginV3* plugin) const { delete plugin; }
};
using PluginPtr = std::unique_ptr<nvinfer1::IPluginV3, PluginDeleter>;

struct Capabilities
{
    nvinfer1::IPluginV3OneCore* core{nullptr};
    nvinfer1::IPluginV3OneBuild* build{nullptr};
    nvinfer1::IPluginV3OneRuntime* runtime{nullptr};
};

//! The three capability interfaces, or a message saying what is wrong with them (name, kinds, nulls).
Capabilities capabilitiesOf(nvinfer1::IPluginV3* plugin, std::string const& expectedName,
                            std::string& problem);

//! Error-level messages logged since the last call (the logger is emptied either way).
std::string errorsLogged(RecordingLogger& logger);

//! Build-phase descriptions; with `dynamicBatch`, dimension 0 is -1 with min 1 / opt = max = the given
//! extent.
std::vector<nvinfer1::DynamicPluginTensorDesc> dynamicDescs(std::vector<TensorSpec> const& specs,
                                                            bool dynamicBatch = false);
std::vector<nvinfer1::PluginTensorDesc> runtimeDescs(std::vector<TensorSpec> const& specs);

//! Largest error of `got` against the reference: relative to the reference's scale for float outputs (as
//! the conformance harness judges them), in units for integer outputs. `where` names the worst element.
double maxError(HostTensor const& got, Reference const& ref, std::string& where);

bool isIntegerType(nvinfer1::DataType type);

//! Throws std::runtime_error("<what>: <CUDA error>") unless `status` is cudaSuccess.
void cudaOk(cudaError_t status, char const* what);

}  // namespace harness
