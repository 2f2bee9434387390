// NVTX ranges around every plugin's enqueue, so that Nsight Systems shows and Nsight Compute filters a
// plugin's kernels inside a whole engine: domain "trt_plugin_kit", one push/pop range per enqueue named
// "<creator> tactic <n>" (e.g. "FullyConnected tactic 3"; tactic 0 is the plugin's default).
//
// Off by default, at no cost: without TRT_PLUGIN_KIT_NVTX the types below are empty and every call is an
// inline no-op. `cmake -DTRT_PLUGIN_KIT_NVTX=ON` turns them on (NVTX v3 is header-only, from the CUDA
// toolkit; with no tool attached each push/pop is one predictable branch).
//
// enqueue must not allocate: the label is written into a fixed buffer in setTactic and on construction, never
// in enqueue (an ASCII message, not a registered string: Nsight Compute's --nvtx-include matches it by text).
// NVTX makes no CUDA call, so the range is harmless inside a CUDA-graph capture (it marks the capture, not
// the replays).
#pragma once

#include <cstdint>

#if TRT_PLUGIN_KIT_NVTX
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#endif

namespace trt_plugin_kit
{

#if TRT_PLUGIN_KIT_NVTX

constexpr char const* kNvtxDomain = "trt_plugin_kit";

//! The one NVTX domain of the library, created on first use (thread-safe static).
inline nvtxDomainHandle_t nvtxDomain()
{
    static nvtxDomainHandle_t const domain = nvtxDomainCreateA(kNvtxDomain);
    return domain;
}

//! "<creator> tactic <n>", kept by each plugin object; set() runs outside enqueue.
class NvtxLabel
{
public:
    void set(char const* creator, int32_t tactic) noexcept
    {
        std::snprintf(mText, sizeof(mText), "%s tactic %d", creator, static_cast<int>(tactic));
        nvtxDomain();  // the domain is created here, before any enqueue, not on the first one
    }
    char const* text() const noexcept { return mText; }

private:
    char mText[96] = "";
};

//! Pushes the label's range for the lifetime of the object (enqueue's body), pops it on every exit path.
class NvtxRange
{
public:
    explicit NvtxRange(NvtxLabel const& label) noexcept
    {
        nvtxEventAttributes_t attributes{};
        attributes.version = NVTX_VERSION;
        attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        attributes.message.ascii = label.text();
        nvtxDomainRangePushEx(nvtxDomain(), &attributes);
    }
    ~NvtxRange() { nvtxDomainRangePop(nvtxDomain()); }
    NvtxRange(NvtxRange const&) = delete;
    NvtxRange& operator=(NvtxRange const&) = delete;
};

#else  // NVTX off: nothing is stored, nothing is called.

class NvtxLabel
{
public:
    void set(char const*, int32_t) noexcept {}
    char const* text() const noexcept { return ""; }
};

class NvtxRange
{
public:
    explicit NvtxRange(NvtxLabel const&) noexcept {}
};

#endif

}  // namespace trt_plugin_kit
