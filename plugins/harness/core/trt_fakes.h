// The parts of TensorRT the harness plays: the process-wide plugin registry (exported as
// `getPluginRegistry`, which the library's static initializer calls), a logger that records every message,
// a symbolic expression builder for getOutputShapes, and a resource context for attachToContext.
#pragma once

#include <NvInferRuntime.h>

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace harness
{

class HarnessRegistry final : public nvinfer1::IPluginRegistry
{
public:
    static HarnessRegistry& instance();

    void setErrorRecorder(nvinfer1::IErrorRecorder* recorder) noexcept override { mRecorder = recorder; }
    nvinfer1::IErrorRecorder* getErrorRecorder() const noexcept override { return mRecorder; }
    bool isParentSearchEnabled() const override { return false; }
    void setParentSearchEnabled(bool const) override {}
    PluginLibraryHandle loadLibrary(nvinfer1::AsciiChar const* pluginPath) noexcept override;
    void deregisterLibrary(PluginLibraryHandle handle) noexcept override;
    bool registerCreator(nvinfer1::IPluginCreatorInterface& creator,
                         nvinfer1::AsciiChar const* const pluginNamespace) noexcept override;
    nvinfer1::IPluginCreatorInterface* const* getAllCreators(
        int32_t* const numCreators) const noexcept override;
    nvinfer1::IPluginCreatorInterface* getCreator(
        nvinfer1::AsciiChar const* const pluginName, nvinfer1::AsciiChar const* const pluginVersion,
        nvinfer1::AsciiChar const* const pluginNamespace = "") noexcept override;
    bool deregisterCreator(nvinfer1::IPluginCreatorInterface const& creator) noexcept override;
    nvinfer1::IPluginResource* acquirePluginResource(nvinfer1::AsciiChar const*,
                                                     nvinfer1::IPluginResource*) noexcept override
    {
        return nullptr;
    }
    int32_t releasePluginResource(nvinfer1::AsciiChar const*) noexcept override { return -1; }
    nvinfer1::IPluginCreatorInterface* const* getAllCreatorsRecursive(
        int32_t* const numCreators) noexcept override
    {
        return getAllCreators(numCreators);
    }

#if NV_TENSORRT_MAJOR < 11
    // TensorRT 10 still declares the IPluginV2 registry calls; this library has no V2 plugins.
    bool registerCreator(nvinfer1::IPluginCreator&, nvinfer1::AsciiChar const* const) noexcept override
    {
        return false;
    }
    nvinfer1::IPluginCreator* const* getPluginCreatorList(int32_t* const numCreators) const noexcept override
    {
        *numCreators = 0;
        return nullptr;
    }
    nvinfer1::IPluginCreator* getPluginCreator(nvinfer1::AsciiChar const* const,
                                               nvinfer1::AsciiChar const* const,
                                               nvinfer1::AsciiChar const* const = "") noexcept override
    {
        return nullptr;
    }
    bool deregisterCreator(nvinfer1::IPluginCreator const&) noexcept override
    {
        return false;
    }
#endif

    size_t size() const
    {
        return mCreators.size();
    }

private:
    HarnessRegistry() = default;
    ~HarnessRegistry() noexcept override = default;
    std::string key(nvinfer1::IPluginCreatorInterface const& creator) const;

    mutable std::mutex mMutex;
    std::vector<nvinfer1::IPluginCreatorInterface*> mCreators;
    std::vector<std::string> mKeys;
    nvinfer1::IErrorRecorder* mRecorder{nullptr};
};

//! Name/version/namespace of a V3 creator, or nullptr when the interface is not IPluginCreatorV3One.
nvinfer1::IPluginCreatorV3One* asV3Creator(nvinfer1::IPluginCreatorInterface* creator);

struct LogEntry
{
    nvinfer1::ILogger::Severity severity;
    std::string message;
};

//! Records every message the library logs; tests check that each rejection explained itself.
class RecordingLogger final : public nvinfer1::ILogger
{
public:
    void log(Severity severity, nvinfer1::AsciiChar const* msg) noexcept override;
    std::vector<LogEntry> take();
    void setEcho(bool echo) { mEcho = echo; }

private:
    std::mutex mMutex;
    std::vector<LogEntry> mEntries;
    bool mEcho{false};
};

class HarnessLoggerFinder final : public nvinfer1::ILoggerFinder
{
public:
    explicit HarnessLoggerFinder(nvinfer1::ILogger* logger) : mLogger(logger) {}
    nvinfer1::ILogger* findLogger() override { return mLogger; }

private:
    nvinfer1::ILogger* mLogger;
};

//! A dimension expression: a constant, a named symbol (a runtime dimension), or an operation on two.
class HarnessExpr;

//! Symbolic IExprBuilder. Constants fold as in TensorRT; symbols are evaluated later with bindings.
class HarnessExprBuilder final : public nvinfer1::IExprBuilder
{
public:
    HarnessExprBuilder();
    ~HarnessExprBuilder() noexcept override;

    nvinfer1::IDimensionExpr const* symbol(int32_t id);
    //! Value of `expr` with symbol i bound to bindings[i].
    static int64_t evaluate(nvinfer1::IDimensionExpr const* expr, std::map<int32_t, int64_t> const& bindings);

    class Impl;

private:
    Impl* mOwned;
};

class HarnessResourceContext final : public nvinfer1::IPluginResourceContext
{
public:
    nvinfer1::IGpuAllocator* getGpuAllocator() const noexcept override { return nullptr; }
    nvinfer1::IErrorRecorder* getErrorRecorder() const noexcept override { return nullptr; }
};

}  // namespace harness
