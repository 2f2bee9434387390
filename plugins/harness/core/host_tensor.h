// Host-side tensors and field collections the harness feeds to plugins, with deterministic random data.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace harness
{

nvinfer1::Dims makeDims(std::vector<int64_t> const& extents);
std::string toString(nvinfer1::Dims const& dims);
int64_t volumeOf(nvinfer1::Dims const& dims);
size_t sizeOf(nvinfer1::DataType type);
char const* typeName(nvinfer1::DataType type);

//! A tensor in host memory in its TensorRT type (FP32, FP16, BF16, INT8 or INT32), readable as doubles.
struct HostTensor
{
    nvinfer1::DataType type{nvinfer1::DataType::kFLOAT};
    nvinfer1::Dims dims{};
    std::vector<uint8_t> bytes;

    HostTensor() = default;
    HostTensor(nvinfer1::DataType type, nvinfer1::Dims dims);
    int64_t count() const { return volumeOf(dims); }
    double get(int64_t i) const;
    void set(int64_t i, double value);  // Rounds to the tensor's type (round-to-nearest-even for FP16, BF16).
};

//! Fills with values in [lo, hi] that are never all zero; FP16 values are exactly representable.
void fillUniform(HostTensor& tensor, std::mt19937& rng, double lo, double hi);

//! Owns the data behind a PluginFieldCollection (what a user's Python script or the ONNX parser builds).
class FieldSet
{
public:
    FieldSet& addInt(std::string const& name, int32_t value) { return addInts(name, {value}); }
    FieldSet& addInts(std::string const& name, std::vector<int32_t> const& values);
    FieldSet& addFloat(std::string const& name, float value) { return addFloats(name, {value}); }
    FieldSet& addFloats(std::string const& name, std::vector<float> const& values);
    FieldSet& addString(std::string const& name, std::string const& value);
    //! Any raw field: wrong types, lengths that lie, null data, for the rejection tests.
    FieldSet& addRaw(std::string const& name, nvinfer1::PluginFieldType type,
                     std::vector<uint8_t> const& bytes, int32_t length, bool nullData = false);

    //! Valid until the FieldSet changes or is destroyed; copies of a FieldSet are independent.
    nvinfer1::PluginFieldCollection const* collection();
    //! The fields as JSON (name -> {type, values}), for the NumPy cross-check of dumped cases.
    std::string toJson() const;

private:
    struct Entry
    {
        std::string name;
        nvinfer1::PluginFieldType type;
        std::vector<uint8_t> data;
        int32_t length;
        bool nullData;
    };
    std::vector<Entry> mEntries;
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mCollection{};
};

//! Serializes a field collection to bytes and back, as an engine plan stores plugin fields; the copy owns
//! its storage, so nothing points into the plugin that produced it.
class SerializedFields
{
public:
    explicit SerializedFields(nvinfer1::PluginFieldCollection const* fc);
    nvinfer1::PluginFieldCollection const* collection();
    std::vector<uint8_t> const& blob() const { return mBlob; }

private:
    std::vector<uint8_t> mBlob;
    FieldSet mFields;
};

size_t fieldTypeSize(nvinfer1::PluginFieldType type);

//! A tensor's type and dims as a case declares it (the harness allocates and fills it).
struct TensorSpec
{
    nvinfer1::DataType type;
    nvinfer1::Dims dims;
};

//! Float64 reference of one output; `scale[i]` (optional) is the magnitude an error at i is relative to
//! (e.g. sum |x*w| for a dot product); without it, max(|value|, 1e-3 * max|value|) is used.
struct Reference
{
    std::vector<double> values;
    std::vector<double> scale;
};

}  // namespace harness
