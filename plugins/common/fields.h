// Typed access to PluginFieldCollection: one named, typed field per attribute. The reader validates what
// TensorRT (or the ONNX parser, or a user's Python script) hands a creator; the writer owns the storage of
// the fields a plugin serializes.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace trt_plugin_kit
{

//! Largest array field accepted (elements); protects against a corrupted length reading far past the data.
constexpr int32_t kMaxFieldElements = int32_t{1} << 28;

class FieldReader
{
public:
    //! Throws PluginError for a malformed collection (negative count, null field array or name, duplicates).
    //! `known` lists the field names of the plugin; any other name is logged as a warning and ignored, so
    //! newer writers and the ONNX parser's extra attributes don't break older readers. A field of length 0 is
    //! not set (as if absent): an ONNX node writes an unset optional field as an empty attribute.
    FieldReader(char const* pluginName, nvinfer1::PluginFieldCollection const* fc,
                std::vector<std::string> const& known);

    bool has(std::string const& name) const { return mFields.count(name) != 0; }

    // Scalars: the field must have length 1. Integer fields accept any integer type that fits int32;
    // float fields accept float16/32/64 and must be finite.
    std::optional<int32_t> getInt(std::string const& name) const;
    std::optional<float> getFloat(std::string const& name) const;
    std::optional<std::string> getString(std::string const& name) const;
    // Arrays: length >= 1 (an empty array is not set, see the constructor).
    std::optional<std::vector<int32_t>> getInts(std::string const& name) const;
    std::optional<std::vector<float>> getFloats(std::string const& name) const;

    int32_t requireInt(std::string const& name) const;
    std::vector<float> requireFloats(std::string const& name) const;

private:
    nvinfer1::PluginField const& field(std::string const& name) const;
    std::vector<double> numbers(std::string const& name, bool wantInteger) const;

    std::string mPlugin;
    std::map<std::string, nvinfer1::PluginField> mFields;
    std::set<std::string> mEmpty;  // given with length 0 (not set); kept to report duplicates
};

//! Accumulates fields for getFieldsToSerialize / getFieldNames. Storage lives as long as the writer, and
//! addresses stay stable (deque), as TensorRT reads the collection after the call returns.
class FieldWriter
{
public:
    void clear();
    void addInt(char const* name, int32_t value);
    void addFloat(char const* name, float value);
    void addInts(char const* name, std::vector<int32_t> const& values);
    void addFloats(char const* name, std::vector<float> const& values);
    void addString(char const* name, std::string const& value);
    //! Declares a field (name and type only), for the creator's getFieldNames.
    void declare(char const* name, nvinfer1::PluginFieldType type, int32_t length);

    nvinfer1::PluginFieldCollection const* collection();

private:
    std::deque<std::vector<int32_t>> mInts;
    std::deque<std::vector<float>> mFloats;
    std::deque<std::string> mStrings;
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mCollection{};
};

char const* fieldTypeName(nvinfer1::PluginFieldType type);

}  // namespace trt_plugin_kit
