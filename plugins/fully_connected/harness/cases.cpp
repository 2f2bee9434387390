// FullyConnected: y[N, M] = x[N, K] . W^T + b (cuBLASLt, FP32 compute with TF32 off).
#include "conformance/cases.h"

#include <cmath>

namespace harness
{
using nvinfer1::DataType;

namespace
{
std::vector<float> randomVector(size_t n, unsigned seed, float amplitude)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-amplitude, amplitude);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

Case fcCase(DataType type, std::vector<int64_t> inputShape, int32_t numOutputs, bool withBias,
            bool dump = false)
{
    int64_t k = 1;
    for (size_t i = 1; i < inputShape.size(); ++i) k *= inputShape[i];
    int64_t const n = inputShape[0];
    auto const weights =
        randomVector(static_cast<size_t>(k * numOutputs), 7U + static_cast<unsigned>(k), 0.1F);
    auto const bias =
        withBias ? randomVector(static_cast<size_t>(numOutputs), 11U, 0.5F) : std::vector<float>{};
    Case c;
    c.plugin = "FullyConnected";
    c.label = std::string(typeName(type)) + " " + toString(makeDims(inputShape)) + " -> " +
              std::to_string(numOutputs) + (withBias ? " +bias" : " no bias");
    c.fields.addFloats("weights", weights).addInt("num_outputs", numOutputs);
    if (withBias) c.fields.addFloats("bias", bias);
    c.inputs = {{type, makeDims(inputShape)}};
    c.outputs = {{type, makeDims({n, numOutputs})}};
    c.tolerance = toleranceFor(type);
    c.dump = dump;
    c.generate = [=](std::vector<HostTensor>& in, std::vector<Reference>& refs, std::mt19937& rng)
    {
        fillUniform(in[0], rng, -1.0, 1.0);
        refs[0].values.assign(static_cast<size_t>(n * numOutputs), 0.0);
        refs[0].scale.assign(static_cast<size_t>(n * numOutputs), 0.0);
        std::vector<double> x(static_cast<size_t>(n * k));
        for (int64_t i = 0; i < n * k; ++i) x[i] = in[0].get(i);
        for (int64_t r = 0; r < n; ++r)
            for (int64_t m = 0; m < numOutputs; ++m)
            {
                double acc = withBias ? bias[m] : 0.0;
                double mag = withBias ? std::fabs(bias[m]) : 0.0;
                double const* xr = &x[static_cast<size_t>(r * k)];
                float const* wr = &weights[static_cast<size_t>(m * k)];
                for (int64_t j = 0; j < k; ++j)
                {
                    double const t = xr[j] * static_cast<double>(wr[j]);
                    acc += t;
                    mag += std::fabs(t);
                }
                refs[0].values[r * numOutputs + m] = acc;
                // Error relative to the magnitude of the dot product's terms (cancellation-safe).
                refs[0].scale[r * numOutputs + m] = mag;
            }
    };
    return c;
}

void addFullyConnectedCases(Suite& suite)
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF})
    {
        suite.cases.push_back(fcCase(type, {1, 50, 4, 4}, 500, true, true));  // LeNet ip1, batch 1 (K=800)
        suite.cases.push_back(fcCase(type, {1, 500}, 10, true, true));        // LeNet ip2
        suite.cases.push_back(fcCase(type, {64, 800}, 500, true));
        suite.cases.push_back(fcCase(type, {3, 7}, 5, false, true));  // odd sizes, no bias
        suite.cases.push_back(fcCase(type, {5, 3, 2, 2}, 9, true));
        suite.cases.push_back(fcCase(type, {4096, 800}, 500, true));  // large batch
        suite.cases.push_back(fcCase(type, {1024, 1}, 3, true));      // K = 1
        // Serving sizes of the own-kernel tactics: LeNet fc1 and fc2 at batch 64 and 1024 (K = 500 takes the
        // 4-byte loads in FP16), and partial tiles in every dimension.
        suite.cases.push_back(fcCase(type, {64, 50, 4, 4}, 500, true));
        suite.cases.push_back(fcCase(type, {1024, 50, 4, 4}, 500, true));
        suite.cases.push_back(fcCase(type, {64, 500}, 10, true));
        suite.cases.push_back(fcCase(type, {1024, 500}, 10, true));
        suite.cases.push_back(fcCase(type, {130, 264}, 70, true));
        suite.cases.push_back(fcCase(type, {67, 9}, 33, false));
    }

    auto reject = [&](std::string label, FieldSet fields, std::string expect) {
        suite.rejects.push_back({"FullyConnected", std::move(label), std::move(fields), std::move(expect)});
    };
    reject("missing weights", FieldSet().addInt("num_outputs", 2), "weights");
    reject("missing num_outputs", FieldSet().addFloats("weights", {1, 2, 3, 4}), "num_outputs");
    reject("weights not a multiple of num_outputs",
           FieldSet().addFloats("weights", {1, 2, 3}).addInt("num_outputs", 2), "multiple");
    reject("bias length",
           FieldSet().addFloats("weights", {1, 2, 3, 4}).addInt("num_outputs", 2).addFloats("bias", {1}),
           "bias");
    reject("zero num_outputs", FieldSet().addFloats("weights", {1, 2}).addInt("num_outputs", 0),
           "num_outputs");
    reject("negative num_outputs", FieldSet().addFloats("weights", {1, 2}).addInt("num_outputs", -2),
           "num_outputs");
    reject("NaN weight", FieldSet().addFloats("weights", {1, NAN}).addInt("num_outputs", 1), "weights");
    reject("weights as int", FieldSet().addInts("weights", {1, 2}).addInt("num_outputs", 1), "weights");
    reject("num_outputs as float", FieldSet().addFloats("weights", {1, 2}).addFloat("num_outputs", 1.F),
           "num_outputs");

    suite.shapeErrors.push_back(
        {"FullyConnected",
         "K does not match the weights",
         FieldSet().addFloats("weights", randomVector(12, 1, 1.F)).addInt("num_outputs", 3),
         {{DataType::kFLOAT, makeDims({2, 5})}},
         {{DataType::kFLOAT, makeDims({2, 3})}},
         "K="});
}
}  // namespace

TRT_PLUGIN_KIT_HARNESS_CASES(addFullyConnectedCases);

}  // namespace harness
