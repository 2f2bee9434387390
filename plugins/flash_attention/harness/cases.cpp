// FlashAttentionTriton's conformance cases: every shape and type runs TensorRT's whole call sequence on the
// GPU against the float64 reference below, errors relative to sum_j p_ij |v_jd| (reference.py's error scale):
// each head size, partial query and key blocks, S_q != S_kv, causal or not, an explicit scale, long
// sequences.
#include "conformance/cases.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace
{
using harness::Case;
using harness::FieldSet;
using nvinfer1::DataType;

struct AttentionShape
{
    int64_t batch, heads, seqQ, seqKv, head;
};

//! softmax(q . k^T * scale) . v per (batch, head) in float64, and the error scale sum_j p_ij |v_jd|.
void referenceAttention(AttentionShape s, bool causal, double scale,
                        std::vector<harness::HostTensor> const& in, harness::Reference& ref)
{
    ref.values.assign(static_cast<size_t>(s.batch * s.heads * s.seqQ * s.head), 0.0);
    ref.scale.assign(ref.values.size(), 0.0);
    std::vector<double> p(static_cast<size_t>(s.seqKv));
    for (int64_t bh = 0; bh < s.batch * s.heads; ++bh)
    {
        int64_t const qBase = bh * s.seqQ * s.head;
        int64_t const kvBase = bh * s.seqKv * s.head;
        for (int64_t i = 0; i < s.seqQ; ++i)
        {
            int64_t const keys = causal ? std::min(i + 1, s.seqKv) : s.seqKv;
            double top = -INFINITY;
            for (int64_t j = 0; j < keys; ++j)
            {
                double dot = 0;
                for (int64_t d = 0; d < s.head; ++d)
                    dot += in[0].get(qBase + i * s.head + d) * in[1].get(kvBase + j * s.head + d);
                p[j] = dot * scale;
                top = std::max(top, p[j]);
            }
            double sum = 0;
            for (int64_t j = 0; j < keys; ++j) sum += (p[j] = std::exp(p[j] - top));
            for (int64_t j = 0; j < keys; ++j)
            {
                double const w = p[j] / sum;
                for (int64_t d = 0; d < s.head; ++d)
                {
                    double const value = in[2].get(kvBase + j * s.head + d);
                    size_t const at = static_cast<size_t>(qBase + i * s.head + d);
                    ref.values[at] += w * value;
                    ref.scale[at] += w * std::fabs(value);
                }
            }
        }
    }
}

Case attentionCase(DataType type, AttentionShape s, bool causal, std::optional<float> scale = std::nullopt,
                   bool dump = false)
{
    Case c;
    c.plugin = "FlashAttentionTriton";
    std::vector<int64_t> const qShape{s.batch, s.heads, s.seqQ, s.head};
    std::vector<int64_t> const kvShape{s.batch, s.heads, s.seqKv, s.head};
    c.label = std::string(harness::typeName(type)) + " q" + harness::toString(harness::makeDims(qShape)) +
              " kv" + harness::toString(harness::makeDims(kvShape)) + (causal ? " causal" : "") +
              (scale ? " scale=" + std::to_string(*scale) : "");
    c.fields.addInt("causal", causal ? 1 : 0);
    if (scale)
    {
        c.fields.addFloat("scale", *scale);
    }
    c.inputs = {{type, harness::makeDims(qShape)},
                {type, harness::makeDims(kvShape)},
                {type, harness::makeDims(kvShape)}};
    c.outputs = {{type, harness::makeDims(qShape)}};
    // FP32: a logit rounded in FP32 is off by about sqrt(D) 2^-24 sum_d |q_d k_d| scale (1e-5 at D = 128 with
    // inputs in [-2, 2]), the same relative error for every probability (kernel.py's TOLERANCE says it too).
    c.tolerance = type == DataType::kFLOAT ? 4e-5 : harness::toleranceFor(type);
    c.dump = dump;
    // The scale as the plugin computes it: a float32 value.
    double const used = scale ? *scale : static_cast<double>(1.F / std::sqrt(static_cast<float>(s.head)));
    c.generate = [s, causal, used](std::vector<harness::HostTensor>& in,
                                   std::vector<harness::Reference>& refs, std::mt19937& rng)
    {
        for (auto& tensor : in) harness::fillUniform(tensor, rng, -2.0, 2.0);
        referenceAttention(s, causal, used, in, refs[0]);
    };
    return c;
}

void addAttentionCases(harness::Suite& suite)
{
    for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        suite.cases.push_back(
            attentionCase(type, {1, 2, 8, 8, 16}, false, std::nullopt, true));  // the spec's
        suite.cases.push_back(
            attentionCase(type, {2, 4, 50, 50, 16}, false, std::nullopt, true));  // mnist_vit
        suite.cases.push_back(
            attentionCase(type, {1, 2, 70, 70, 32}, true, std::nullopt, true));  // partial blocks
        suite.cases.push_back(
            attentionCase(type, {2, 1, 5, 97, 64}, false, 0.3F, true));          // S_q != S_kv, scale
        suite.cases.push_back(attentionCase(type, {1, 3, 129, 65, 128}, true));  // causal, S_kv < S_q
        suite.cases.push_back(attentionCase(type, {4, 8, 256, 256, 64}, false));
        // the tactics' 128-query blocks: causal with keys left of the diagonal unmasked, S_kv not a multiple
        // of any key block
        suite.cases.push_back(attentionCase(type, {1, 2, 300, 300, 64}, true));
        suite.cases.push_back(attentionCase(type, {1, 2, 200, 333, 128}, false));
        suite.cases.push_back(attentionCase(type, {1, 2, 1024, 1024, 128}, true));
        suite.cases.push_back(attentionCase(type, {1, 1, 4096, 4096, 64}, false));  // a long sequence
    }
    DataType const f32 = DataType::kFLOAT;
    auto const dims = [](std::vector<int64_t> const& d) { return harness::makeDims(d); };
    FieldSet const plain = FieldSet().addInt("causal", 0);
    suite.shapeErrors.push_back(
        {"FlashAttentionTriton",
         "head size 24",
         plain,
         {{f32, dims({1, 1, 8, 24})}, {f32, dims({1, 1, 8, 24})}, {f32, dims({1, 1, 8, 24})}},
         {{f32, dims({1, 1, 8, 24})}},
         "head size"});
    suite.shapeErrors.push_back(
        {"FlashAttentionTriton",
         "k's D differs",
         plain,
         {{f32, dims({1, 1, 8, 16})}, {f32, dims({1, 1, 8, 32})}, {f32, dims({1, 1, 8, 32})}},
         {{f32, dims({1, 1, 8, 16})}},
         "share q's"});
    suite.shapeErrors.push_back(
        {"FlashAttentionTriton",
         "v's S differs",
         plain,
         {{f32, dims({1, 1, 8, 16})}, {f32, dims({1, 1, 8, 16})}, {f32, dims({1, 1, 9, 16})}},
         {{f32, dims({1, 1, 8, 16})}},
         "k's shape"});
    suite.shapeErrors.push_back({"FlashAttentionTriton",
                                 "rank 3",
                                 plain,
                                 {{f32, dims({1, 8, 16})}, {f32, dims({1, 8, 16})}, {f32, dims({1, 8, 16})}},
                                 {{f32, dims({1, 8, 16})}},
                                 "[B, H, S, D]"});
    suite.shapeErrors.push_back(
        {"FlashAttentionTriton",
         "S_kv beyond 16384",
         plain,
         {{f32, dims({1, 1, 8, 16})}, {f32, dims({1, 1, 16385, 16})}, {f32, dims({1, 1, 16385, 16})}},
         {{f32, dims({1, 1, 8, 16})}},
         "S_kv"});
}
}  // namespace

TRT_PLUGIN_KIT_HARNESS_CASES(addAttentionCases);
