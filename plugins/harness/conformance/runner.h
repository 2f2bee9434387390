// Plays TensorRT's part for one plugin: the build-phase calls, the serialize round trip, and the runtime
// calls up to enqueue on a non-default stream and a CUDA-graph replay.
#pragma once

#include <string>

#include "conformance/cases.h"
#include "core/trt_fakes.h"

namespace harness
{

struct Result
{
    bool pass{false};
    std::string detail;
};

struct RunOptions
{
    bool gpu{true};
    std::string dumpDir;  // empty: no dumps
};

Result runCase(Case& testCase, RunOptions const& options, RecordingLogger& logger, int caseIndex);
Result runReject(RejectCase& reject, RecordingLogger& logger);
Result runShapeError(ShapeErrorCase& shapeError, RecordingLogger& logger);

nvinfer1::IPluginCreatorV3One* findCreator(std::string const& plugin);

}  // namespace harness
