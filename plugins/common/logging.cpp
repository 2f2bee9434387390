#include "logging.h"

#include <atomic>
#include <cstdio>

namespace trt_plugin_kit
{
namespace
{
std::atomic<nvinfer1::ILoggerFinder*> gLoggerFinder{nullptr};

char const* severityName(Severity severity)
{
    switch (severity)
    {
        case Severity::kINTERNAL_ERROR:
            return "INTERNAL_ERROR";
        case Severity::kERROR:
            return "ERROR";
        case Severity::kWARNING:
            return "WARNING";
        case Severity::kINFO:
            return "INFO";
        case Severity::kVERBOSE:
            return "VERBOSE";
    }
    return "?";
}
}  // namespace

void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    gLoggerFinder.store(finder);
}

void log(Severity severity, std::string const& message) noexcept
{
    try
    {
        // Ask the finder every time: TensorRT may only have a logger once a builder or runtime exists.
        nvinfer1::ILoggerFinder* finder = gLoggerFinder.load();
        nvinfer1::ILogger* logger = finder != nullptr ? finder->findLogger() : nullptr;
        std::string const text = "[trt_plugin_kit] " + message;
        if (logger != nullptr)
        {
            logger->log(severity, text.c_str());
        }
        else if (severity <= Severity::kWARNING)
        {
            std::fprintf(stderr, "[%s] %s\n", severityName(severity), text.c_str());
        }
    }
    catch (...)
    {
        // Logging must never be the reason an exception crosses the TensorRT ABI.
    }
}

}  // namespace trt_plugin_kit
