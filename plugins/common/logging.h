// Logging through TensorRT's logger. TensorRT hands the library an ILoggerFinder through the exported
// `setLoggerFinder` (loadLibrary, trtexec --dynamicPlugins, Python load_library). When the library is only
// LD_PRELOADed or dlopen'ed (Triton's TensorRT backend), nobody calls it, so messages fall back to stderr.
#pragma once

#include <NvInferRuntime.h>

#include <string>

namespace trt_plugin_kit
{

using Severity = nvinfer1::ILogger::Severity;

void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept;

//! Sends `message` to TensorRT's logger (or stderr for warnings and errors when there is none).
void log(Severity severity, std::string const& message) noexcept;

inline void logError(std::string const& message) noexcept
{
    log(Severity::kERROR, message);
}
inline void logWarning(std::string const& message) noexcept
{
    log(Severity::kWARNING, message);
}
inline void logVerbose(std::string const& message) noexcept
{
    log(Severity::kVERBOSE, message);
}

}  // namespace trt_plugin_kit
