// libFuzzer target: the compiled front's ModelInfer rules (model_infer.cc) on any message. The configuration
// and models are the Python edge's own (edge/native_front.py writes them to $EDGE_FUZZ_CONFIG; the test does,
// tests/server/test_edge_fuzz.py). A verdict is an encoded request or a Refused; anything else (a crash, a
// sanitizer report, another exception crossing checkModelInfer) is a finding.
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "../edge.h"

namespace
{

const edge::Models* loadOnce()
{
    static std::shared_ptr<const edge::Models> models = []
    {
        const char* path = std::getenv("EDGE_FUZZ_CONFIG");
        std::ifstream in(path ? path : "");
        edge::Lines lines;
        if (!edge::readBlock(in, lines))
        {
            std::cerr << "EDGE_FUZZ_CONFIG must name the configuration and model blocks\n";
            std::abort();
        }
        edge::configure(lines);
        lines.clear();
        edge::readBlock(in, lines);
        return edge::readModels(lines);
    }();
    return models.get();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const edge::Models* models = loadOnce();
    std::string model;
    try
    {
        std::string encoded = edge::checkModelInfer(
            std::string_view(reinterpret_cast<const char*>(data), size), *models, model);
        // What passes is re-encoded: it must pass again, as the same request.
        std::string again;
        if (edge::checkModelInfer(encoded, *models, again) != encoded || again != model) std::abort();
    }
    catch (const edge::Refused& refused)
    {
        if (refused.message.empty()) std::abort();  // every refusal says why
    }
    return 0;
}
