// The plugins' specs (plugins/<name>/spec.yaml) for the C++ test tools: names, fields with their valid
// ranges, and a plausible shape per plugin. The table itself (plugin_specs.cpp in the build directory) is
// generated from the YAML files by `python -m trt_plugin_kit.specs cpp` when the tools are built, so a
// new plugin folder reaches the harness and the fuzzer without an edit here.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/host_tensor.h"

namespace harness
{

//! Integer field values a shape rule reads: a plugin's serialized fields (throws std::out_of_range for a
//! field that is not there).
class FieldValues
{
public:
    virtual ~FieldValues() = default;
    virtual int64_t value(std::string const& field, int64_t index) const = 0;
    virtual int64_t length(std::string const& field) const = 0;
};

//! Python's // for the shape rules (rounds toward minus infinity).
inline int64_t floorDiv(int64_t a, int64_t b)
{
    if (b == 0) return 0;
    int64_t const q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

using DimRule = std::function<int64_t(FieldValues const&)>;

struct FieldSpec
{
    std::string name;
    nvinfer1::PluginFieldType type{nvinfer1::PluginFieldType::kUNKNOWN};  // kFLOAT32, kINT32 or kCHAR
    int32_t length{1};  // as getFieldNames() declares it: 1, 2, ... or -1 (any length >= 1, or a string)
    bool required{false};
    bool optional{false};                // may be left unset, and has no default
    std::vector<double> defaultNumbers;  // numeric default (empty: none)
    std::optional<std::string> defaultString;
    std::string defaultFrom;  // the default is this field's value
    std::optional<double> min, max, greaterThan;
    std::vector<double> numberChoices;
    std::vector<std::string> stringChoices;
    std::string lessThan;          // each element < that field's element
    std::string lengthEquals;      // length == that (scalar int) field's value
    std::string lengthMultipleOf;  // length is a multiple of that field's value
};

struct PluginSpec
{
    std::string name;
    std::string version;
    std::vector<std::vector<nvinfer1::DataType>> inputTypes;  // per input
    int32_t nbOutputs{1};
    std::vector<FieldSpec> fields;
    FieldSet example;  // the required fields' values
    std::vector<std::vector<DimRule>> shapeInputs, shapeOutputs;

    FieldSpec const* field(std::string const& fieldName) const
    {
        for (auto const& f : fields)
            if (f.name == fieldName) return &f;
        return nullptr;
    }
};

//! Every plugin folder's spec, sorted by folder name (generated).
std::vector<PluginSpec> const& pluginSpecs();

}  // namespace harness
