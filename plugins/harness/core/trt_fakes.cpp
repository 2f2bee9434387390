#include "core/trt_fakes.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace harness
{
using namespace nvinfer1;

// ---------------------------------------------------------------- registry
HarnessRegistry& HarnessRegistry::instance()
{
    static HarnessRegistry* registry = new HarnessRegistry();  // Never destroyed: outlives library unloads.
    return *registry;
}

IPluginCreatorV3One* asV3Creator(IPluginCreatorInterface* creator)
{
    if (creator == nullptr)
    {
        return nullptr;
    }
    InterfaceInfo const info = creator->getInterfaceInfo();
    if (std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") != 0 || info.major != 1)
    {
        return nullptr;
    }
    return static_cast<IPluginCreatorV3One*>(creator);
}

std::string HarnessRegistry::key(IPluginCreatorInterface const& creator) const
{
    auto* v3 = asV3Creator(const_cast<IPluginCreatorInterface*>(&creator));
    if (v3 == nullptr)
    {
        return {};
    }
    return std::string(v3->getPluginNamespace()) + "::" + v3->getPluginName() + "@" + v3->getPluginVersion();
}

bool HarnessRegistry::registerCreator(IPluginCreatorInterface& creator,
                                      AsciiChar const* const /*ns*/) noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    std::string const k = key(creator);
    if (k.empty())
    {
        std::fprintf(stderr, "harness registry: rejected a creator that is not IPluginCreatorV3One\n");
        return false;
    }
    for (auto const& existing : mKeys)
    {
        if (existing == k)
        {
            return false;  // As TensorRT: a second creator with the same name, version and namespace is
                           // refused.
        }
    }
    mCreators.push_back(&creator);
    mKeys.push_back(k);
    return true;
}

bool HarnessRegistry::deregisterCreator(IPluginCreatorInterface const& creator) noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    for (size_t i = 0; i < mCreators.size(); ++i)
    {
        if (mCreators[i] == &creator)
        {
            mCreators.erase(mCreators.begin() + static_cast<std::ptrdiff_t>(i));
            mKeys.erase(mKeys.begin() + static_cast<std::ptrdiff_t>(i));
            return true;
        }
    }
    return false;
}

IPluginCreatorInterface* const* HarnessRegistry::getAllCreators(int32_t* const numCreators) const noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    *numCreators = static_cast<int32_t>(mCreators.size());
    return mCreators.data();
}

IPluginCreatorInterface* HarnessRegistry::getCreator(AsciiChar const* const pluginName,
                                                     AsciiChar const* const pluginVersion,
                                                     AsciiChar const* const pluginNamespace) noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    std::string const k =
        std::string(pluginNamespace ? pluginNamespace : "") + "::" + pluginName + "@" + pluginVersion;
    for (size_t i = 0; i < mKeys.size(); ++i)
    {
        if (mKeys[i] == k)
        {
            return mCreators[i];
        }
    }
    return nullptr;
}

// What IPluginRegistry::loadLibrary does: dlopen, hand over the logger, register what getCreators returns.
IPluginRegistry::PluginLibraryHandle HarnessRegistry::loadLibrary(AsciiChar const* pluginPath) noexcept
{
    void* handle = dlopen(pluginPath, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr)
    {
        std::fprintf(stderr, "harness registry: dlopen(%s) failed: %s\n", pluginPath, dlerror());
        return nullptr;
    }
    using GetCreators = IPluginCreatorInterface* const* (*)(int32_t&);
    auto getCreators = reinterpret_cast<GetCreators>(dlsym(handle, "getCreators"));
    if (getCreators == nullptr)
    {
        std::fprintf(stderr, "harness registry: %s does not export getCreators\n", pluginPath);
        return nullptr;
    }
    int32_t count = 0;
    IPluginCreatorInterface* const* creators = getCreators(count);
    for (int32_t i = 0; i < count; ++i)
    {
        if (!registerCreator(*creators[i], ""))
        {
            std::fprintf(stderr, "harness registry: could not register creator %d of %s\n", i, pluginPath);
            return nullptr;
        }
    }
    return handle;
}

void HarnessRegistry::deregisterLibrary(PluginLibraryHandle handle) noexcept
{
    if (handle != nullptr)
    {
        dlclose(handle);
    }
}

// ---------------------------------------------------------------- logger
void RecordingLogger::log(Severity severity, AsciiChar const* msg) noexcept
{
    std::lock_guard<std::mutex> lock(mMutex);
    mEntries.push_back({severity, msg ? msg : ""});
    if (mEcho)
    {
        std::fprintf(stderr, "  [log %d] %s\n", static_cast<int>(severity), msg ? msg : "");
    }
}

std::vector<LogEntry> RecordingLogger::take()
{
    std::lock_guard<std::mutex> lock(mMutex);
    std::vector<LogEntry> out;
    out.swap(mEntries);
    return out;
}

// ---------------------------------------------------------------- expressions
class HarnessExpr final : public IDimensionExpr
{
public:
    enum class Kind
    {
        kConstant,
        kSymbol,
        kOperation
    };

    class Impl final : public apiv::VDimensionExpr
    {
    public:
        explicit Impl(HarnessExpr const& owner) : mOwner(owner) {}
        bool isConstant() const override { return mOwner.kind == Kind::kConstant; }
        int64_t getConstantValue() const override
        {
            return mOwner.kind == Kind::kConstant ? mOwner.value : -1;
        }
        bool isSizeTensor() const override { return false; }

    private:
        HarnessExpr const& mOwner;
    };

    HarnessExpr() : mImplObject(*this) { mImpl = &mImplObject; }
    ~HarnessExpr() noexcept override = default;

    Kind kind{Kind::kConstant};
    int64_t value{0};
    int32_t symbolId{0};
    DimensionOperation op{DimensionOperation::kSUM};
    HarnessExpr const* first{nullptr};
    HarnessExpr const* second{nullptr};

private:
    Impl mImplObject;
};

namespace
{
int64_t apply(DimensionOperation op, int64_t a, int64_t b)
{
    switch (op)
    {
        case DimensionOperation::kSUM:
            return a + b;
        case DimensionOperation::kPROD:
            return a * b;
        case DimensionOperation::kMAX:
            return std::max(a, b);
        case DimensionOperation::kMIN:
            return std::min(a, b);
        case DimensionOperation::kSUB:
            return a - b;
        case DimensionOperation::kEQUAL:
            return a == b ? 1 : 0;
        case DimensionOperation::kLESS:
            return a < b ? 1 : 0;
        case DimensionOperation::kFLOOR_DIV:
        {
            if (b == 0) throw std::runtime_error("floor division by zero in a shape expression");
            int64_t q = a / b;
            return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
        }
        case DimensionOperation::kCEIL_DIV:
        {
            if (b == 0) throw std::runtime_error("ceil division by zero in a shape expression");
            int64_t q = a / b;
            return (q * b != a && ((a < 0) == (b < 0))) ? q + 1 : q;
        }
    }
    throw std::runtime_error("unknown DimensionOperation");
}
}  // namespace

class HarnessExprBuilder::Impl final : public apiv::VExprBuilder
{
public:
    IDimensionExpr const* constant(int64_t value) override
    {
        HarnessExpr& e = mExprs.emplace_back();
        e.kind = HarnessExpr::Kind::kConstant;
        e.value = value;
        return &e;
    }
    IDimensionExpr const* operation(DimensionOperation op, IDimensionExpr const& first,
                                    IDimensionExpr const& second) override
    {
        auto const& a = static_cast<HarnessExpr const&>(first);
        auto const& b = static_cast<HarnessExpr const&>(second);
        if (a.kind == HarnessExpr::Kind::kConstant && b.kind == HarnessExpr::Kind::kConstant)
        {
            return constant(apply(op, a.value, b.value));  // TensorRT folds constants too.
        }
        HarnessExpr& e = mExprs.emplace_back();
        e.kind = HarnessExpr::Kind::kOperation;
        e.op = op;
        e.first = &a;
        e.second = &b;
        return &e;
    }
    IDimensionExpr const* declareSizeTensor(int32_t, IDimensionExpr const&, IDimensionExpr const&) override
    {
        return nullptr;  // None of our plugins has data-dependent output shapes.
    }
    IDimensionExpr const* symbol(int32_t id)
    {
        HarnessExpr& e = mExprs.emplace_back();
        e.kind = HarnessExpr::Kind::kSymbol;
        e.symbolId = id;
        return &e;
    }

private:
    std::deque<HarnessExpr> mExprs;
};

HarnessExprBuilder::HarnessExprBuilder() : mOwned(new Impl())
{
    mImpl = mOwned;
}

HarnessExprBuilder::~HarnessExprBuilder() noexcept
{
    delete mOwned;
}

IDimensionExpr const* HarnessExprBuilder::symbol(int32_t id)
{
    return mOwned->symbol(id);
}

int64_t HarnessExprBuilder::evaluate(IDimensionExpr const* expr, std::map<int32_t, int64_t> const& bindings)
{
    if (expr == nullptr)
    {
        throw std::runtime_error("null dimension expression");
    }
    auto const* e = static_cast<HarnessExpr const*>(expr);
    switch (e->kind)
    {
        case HarnessExpr::Kind::kConstant:
            return e->value;
        case HarnessExpr::Kind::kSymbol:
            return bindings.at(e->symbolId);
        case HarnessExpr::Kind::kOperation:
            return apply(e->op, evaluate(e->first, bindings), evaluate(e->second, bindings));
    }
    throw std::runtime_error("bad expression");
}

}  // namespace harness

// TensorRT's process-wide registry, as libnvinfer exports it. The plugin library references this symbol
// weakly and calls it from its static initializer, exactly as it would inside Triton.
extern "C" __attribute__((visibility("default"))) nvinfer1::IPluginRegistry* getPluginRegistry() noexcept
{
    return &harness::HarnessRegistry::instance();
}
