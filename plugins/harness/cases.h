// What a conformance case is. Each plugin contributes its cases in cases_<plugin>.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "host_tensor.h"

namespace harness
{

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

//! One full run through TensorRT's call sequence, compared with a reference.
struct Case
{
    std::string plugin;
    std::string label;
    FieldSet fields;
    std::vector<TensorSpec> inputs;
    std::vector<TensorSpec> outputs;  // expected output types and dims
    //! Fills `inputs` (already sized from the specs) and computes the references. Called only on a GPU.
    std::function<void(std::vector<HostTensor>& inputs, std::vector<Reference>& references,
                       std::mt19937& rng)>
        generate;
    //! Relative error bound for float outputs; absolute units for integer outputs (INT8 pool: 1).
    double tolerance{1e-5};
    //! Small cases are also dumped for the NumPy cross-check (--dump).
    bool dump{false};
};

//! Bad fields: createPlugin must return nullptr and log an error that contains `expect`.
struct RejectCase
{
    std::string plugin;
    std::string label;
    FieldSet fields;
    std::string expect;
};

//! Good fields, shapes that do not fit: reported by getOutputShapes, configurePlugin or onShapeChange.
struct ShapeErrorCase
{
    std::string plugin;
    std::string label;
    FieldSet fields;
    std::vector<TensorSpec> inputs;
    std::vector<TensorSpec> outputs;  // what TensorRT would pass to configure/onShapeChange
    std::string expect;
};

struct Suite
{
    std::vector<Case> cases;
    std::vector<RejectCase> rejects;
    std::vector<ShapeErrorCase> shapeErrors;
};

// Tolerances of the issue: FP32 relative error <= 1e-5, FP16 <= 2e-3.
constexpr double kFp32Tolerance = 1e-5;
constexpr double kFp16Tolerance = 2e-3;
inline double toleranceFor(nvinfer1::DataType type)
{
    return type == nvinfer1::DataType::kHALF ? kFp16Tolerance : kFp32Tolerance;
}

void addL2NormalizeCases(Suite& suite);
void addActivationCases(Suite& suite);  // PReLU and LeakyReLU
void addFullyConnectedCases(Suite& suite);
void addPoolCases(Suite& suite);
void addConcatCopyCases(Suite& suite);

}  // namespace harness
