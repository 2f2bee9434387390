// Shared by every program that plays TensorRT's part (plugin_harness, plugin_stress, the benchmark).
#include "core/sequence.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace harness
{
using namespace nvinfer1;

Capabilities capabilitiesOf(IPluginV3* plugin, std::string const& expectedName, std::string& problem)
{
    Capabilities caps;
    problem.clear();
    if (plugin == nullptr)
    {
        problem = "null plugin";
        return caps;
    }
    caps.core = static_cast<IPluginV3OneCore*>(plugin->getCapabilityInterface(PluginCapabilityType::kCORE));
    caps.build =
        static_cast<IPluginV3OneBuild*>(plugin->getCapabilityInterface(PluginCapabilityType::kBUILD));
    caps.runtime =
        static_cast<IPluginV3OneRuntime*>(plugin->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
    if (!caps.core || !caps.build || !caps.runtime)
    {
        problem = "getCapabilityInterface returned null";
        return caps;
    }
    if (std::strcmp(caps.core->getInterfaceInfo().kind, "PLUGIN_V3ONE_CORE") != 0 ||
        std::strcmp(caps.build->getInterfaceInfo().kind, "PLUGIN_V3ONE_BUILD") != 0 ||
        std::strcmp(caps.runtime->getInterfaceInfo().kind, "PLUGIN_V3ONE_RUNTIME") != 0)
    {
        problem = "capability interfaces report the wrong kinds";
        return caps;
    }
    if (expectedName != caps.core->getPluginName() || std::string("1") != caps.core->getPluginVersion() ||
        std::string("trt_plugin_kit") != caps.core->getPluginNamespace())
    {
        problem = std::string("plugin reports ") + caps.core->getPluginNamespace() +
                  "::" + caps.core->getPluginName() + " v" + caps.core->getPluginVersion();
    }
    return caps;
}

std::string errorsLogged(RecordingLogger& logger)
{
    std::string all;
    for (auto const& e : logger.take())
    {
        if (e.severity <= ILogger::Severity::kERROR)
        {
            all += (all.empty() ? "" : " | ") + e.message;
        }
    }
    return all;
}

std::vector<DynamicPluginTensorDesc> dynamicDescs(std::vector<TensorSpec> const& specs, bool dynamicBatch)
{
    std::vector<DynamicPluginTensorDesc> descs(specs.size());
    for (size_t i = 0; i < specs.size(); ++i)
    {
        auto& d = descs[i];
        d.desc.type = specs[i].type;
        d.desc.format = TensorFormat::kLINEAR;
        d.desc.scale = 1.F;
        d.desc.dims = specs[i].dims;
        d.min = d.opt = d.max = specs[i].dims;
        if (dynamicBatch && specs[i].dims.nbDims > 0)
        {
            d.desc.dims.d[0] = -1;  // A dynamic batch, as in the Triton engines.
            d.min.d[0] = std::min<int64_t>(1, specs[i].dims.d[0]);
        }
    }
    return descs;
}

std::vector<PluginTensorDesc> runtimeDescs(std::vector<TensorSpec> const& specs)
{
    std::vector<PluginTensorDesc> descs(specs.size());
    for (size_t i = 0; i < specs.size(); ++i)
    {
        descs[i].type = specs[i].type;
        descs[i].format = TensorFormat::kLINEAR;
        descs[i].scale = 1.F;
        descs[i].dims = specs[i].dims;
    }
    return descs;
}

bool isIntegerType(DataType type)
{
    return type == DataType::kINT8 || type == DataType::kINT32;
}

double maxError(HostTensor const& got, Reference const& ref, std::string& where)
{
    int64_t const n = got.count();
    if (static_cast<int64_t>(ref.values.size()) != n)
    {
        where =
            "reference has " + std::to_string(ref.values.size()) + " values, output has " + std::to_string(n);
        return INFINITY;
    }
    bool const integer = isIntegerType(got.type);
    double maxAbs = 0.0;
    for (double v : ref.values)
    {
        maxAbs = std::max(maxAbs, std::fabs(v));
    }
    double worst = 0.0;
    for (int64_t i = 0; i < n; ++i)
    {
        double const g = got.get(i);
        double const r = ref.values[i];
        if (std::isnan(g) != std::isnan(r))
        {
            where = "element " + std::to_string(i) + " is NaN (output not written?)";
            return INFINITY;
        }
        double err;
        if (integer)
        {
            err = std::fabs(g - r);
        }
        else
        {
            double const scale = ref.scale.empty() ? std::max(std::fabs(r), 1e-3 * maxAbs) : ref.scale[i];
            double const representable = got.type == DataType::kHALF ? std::ldexp(1.0, -24) : 0.0;
            err = std::max(0.0, std::fabs(g - r) - representable) / std::max(scale, 1e-30);
        }
        if (err > worst)
        {
            worst = err;
            std::ostringstream out;
            out << "element " << i << ": got " << g << ", expected " << r;
            where = out.str();
        }
    }
    return worst;
}

void cudaOk(cudaError_t status, char const* what)
{
    if (status != cudaSuccess)
    {
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                                 cudaGetErrorString(status) + ")");
    }
}

}  // namespace harness
