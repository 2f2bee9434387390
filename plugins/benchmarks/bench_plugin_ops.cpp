// One plugin as an op of another program's forward (trt_plugin_kit/benchmarks/vit_graph.py: mnist_vit in
// PyTorch with its RMSNorm, attention and SwiGLU enqueued through IPluginV3): created and configured through
// TensorRT's call sequence (plan(): the harness's fakes, the serialize round trip, attachToContext,
// onShapeChange), then enqueued on the caller's stream with the caller's device pointers (a torch tensor's
// data_ptr()), so that the caller's CUDA graph captures it.
//
// C API (0 on success, else non-zero with the reason in `message`):
//   tpk_bench_op_create(plugin, fields, io, &handle, message, len): the outputs "type:dims;..." in `message`
//   tpk_bench_op_choose_tactic(handle, inputs, outputs, stream, message, len): every tactic timed on those
//     tensors as TensorRT's builder does (in a CUDA graph), the fastest kept; `message`: "chosen: 0:us ..."
//   tpk_bench_op_enqueue(handle, inputs, outputs, stream, message, len): capturable, no allocation or sync
//   tpk_bench_op_destroy(handle)
#include "bench_support.h"
#include "tactic_choice.h"

namespace tpk_bench
{
namespace
{
struct PluginOp
{
    std::string plugin;
    Planned planned;
    harness::HarnessResourceContext context;
    PluginPtr attached;
    IPluginV3OneRuntime* runtime{nullptr};
    std::vector<PluginTensorDesc> inDescs, outDescs;
    std::unique_ptr<DeviceMemory> workspace;
};

std::vector<std::unique_ptr<PluginOp>>& ops()
{
    static std::vector<std::unique_ptr<PluginOp>> all;
    return all;
}

PluginOp& opOf(int handle)
{
    if (handle < 0 || handle >= static_cast<int>(ops().size()) || !ops()[handle])
        fail("no plugin op with handle ", handle);
    return *ops()[handle];
}

std::unique_ptr<PluginOp> createOp(std::string const& plugin, std::string const& fields,
                                   std::string const& io)
{
    auto op = std::make_unique<PluginOp>();
    op->plugin = plugin;
    op->planned = plan(plugin, fields, io);
    attachForRuntime(*op, plugin);
    op->workspace = std::make_unique<DeviceMemory>(op->planned.workspaceBytes);
    return op;
}

void enqueueOp(PluginOp& op, void const* const* inputs, void* const* outputs, cudaStream_t stream)
{
    int32_t const status = op.runtime->enqueue(op.inDescs.data(), op.outDescs.data(), inputs, outputs,
                                               op.workspace->ptr, stream);
    if (status != 0) fail(op.plugin, " enqueue returned ", status, ": ", errorsLogged());
}
}  // namespace
}  // namespace tpk_bench

using namespace tpk_bench;

extern "C"
{
    __attribute__((visibility("default"))) int tpk_bench_op_create(char const* plugin, char const* fields,
                                                                   char const* io, int* handle, char* message,
                                                                   int messageLength)
    {
        return guarded(message, messageLength,
                       [&](std::string& text)
                       {
                           if (handle == nullptr) fail("no handle to write");
                           std::unique_ptr<PluginOp> op =
                               createOp(plugin ? plugin : "", fields ? fields : "", io ? io : "");
                           text = describe(op->planned.outputs);
                           ops().push_back(std::move(op));
                           *handle = static_cast<int>(ops().size()) - 1;
                       });
    }

    __attribute__((visibility("default"))) int tpk_bench_op_choose_tactic(int handle,
                                                                          void const* const* inputs,
                                                                          void* const* outputs, void* stream,
                                                                          char* message, int messageLength)
    {
        return guarded(message, messageLength,
                       [&](std::string& text)
                       {
                           PluginOp& op = opOf(handle);
                           auto const s = static_cast<cudaStream_t>(stream);
                           TacticChoice const choice = chooseTactic(
                               op.plugin, op.attached.get(),
                               [&](int64_t /*set*/) { enqueueOp(op, inputs, outputs, s); }, 1, true, 0, s);
                           text = std::to_string(choice.tactic) + ": " + choice.timings;
                       });
    }

    __attribute__((visibility("default"))) int tpk_bench_op_enqueue(int handle, void const* const* inputs,
                                                                    void* const* outputs, void* stream,
                                                                    char* message, int messageLength)
    {
        return guarded(message, messageLength,
                       [&](std::string& /*text*/)
                       { enqueueOp(opOf(handle), inputs, outputs, static_cast<cudaStream_t>(stream)); });
    }

    __attribute__((visibility("default"))) void tpk_bench_op_destroy(int handle)
    {
        if (handle >= 0 && handle < static_cast<int>(ops().size())) ops()[handle].reset();
    }
}
