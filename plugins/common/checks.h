// Error handling shared by every plugin. Inside the library, mistakes throw PluginError; the base classes
// catch everything at the TensorRT ABI boundary, log it, and turn it into an error code or nullptr.
#pragma once

#include <cuda_runtime_api.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace trt_plugin_kit
{

class PluginError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

//! Builds a message from stream-able parts: concat("axis ", 3, " out of range").
template <typename... Parts>
std::string concat(Parts const&... parts)
{
    std::ostringstream stream;
    (stream << ... << parts);
    return stream.str();
}

template <typename... Parts>
[[noreturn]] void fail(Parts const&... parts)
{
    throw PluginError(concat(parts...));
}

template <typename... Parts>
void check(bool condition, Parts const&... parts)
{
    if (!condition)
    {
        fail(parts...);
    }
}

//! For lifecycle calls (never enqueue): throws on a CUDA error.
inline void checkCuda(cudaError_t status, char const* what)
{
    if (status != cudaSuccess)
    {
        fail(what, " failed: ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
    }
}

}  // namespace trt_plugin_kit
