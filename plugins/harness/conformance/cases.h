// What a conformance case is. Every plugin folder holds its own cases in plugins/<name>/harness/*.cpp,
// registered with TRT_PLUGIN_KIT_HARNESS_CASES, which the harness's CMake collects with no edit here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/host_tensor.h"

namespace harness
{

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

// Tolerances of the issue: FP32 relative error <= 1e-5, FP16 <= 2e-3. BF16 keeps 8 significant bits (FP16
// 11): rounding the output alone costs up to 2^-8 = 3.9e-3, so its bound is FP16's ratio to its own rounding
// (2e-3 / 2^-11, about 4) times 2^-8.
constexpr double kFp32Tolerance = 1e-5;
constexpr double kFp16Tolerance = 2e-3;
constexpr double kBf16Tolerance = 1.6e-2;
inline double toleranceFor(nvinfer1::DataType type)
{
    return type == nvinfer1::DataType::kHALF   ? kFp16Tolerance
           : type == nvinfer1::DataType::kBF16 ? kBf16Tolerance
                                               : kFp32Tolerance;
}

using CaseAdder = void (*)(Suite&);
//! Records a plugin folder's case function (from a static initializer; see TRT_PLUGIN_KIT_HARNESS_CASES).
struct CaseRegistration
{
    explicit CaseRegistration(CaseAdder add);
};
//! Every plugin folder's registered cases, in link order (plugin folders sorted by name).
Suite allCases();

}  // namespace harness

// One line in a plugin folder's harness/cases.cpp, in the namespace that holds the function:
// TRT_PLUGIN_KIT_HARNESS_CASES(addMyCases);
#define TRT_PLUGIN_KIT_HARNESS_CASES(function)                           \
    namespace                                                            \
    {                                                                    \
    ::harness::CaseRegistration const gHarnessCases##function{function}; \
    }                                                                    \
    static_assert(true, "")
