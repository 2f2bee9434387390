// libFuzzer target: gRPC's own layer in the compiled front (framing.cc): grpc-timeout values, grpc-message's
// percent-encoding, the 5-byte message prefix, and gzip/deflate messages inflated within a limit. The first
// byte picks the part; the rest is its input.
#include <cstdlib>

#include "../transport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size == 0) return 0;
    std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 4)
    {
        case 0:
        {
            edge::Clock::duration timeout{};
            if (edge::parseTimeout(input, timeout) && timeout < edge::Clock::duration::zero()) std::abort();
            break;
        }
        case 1:
            // What we send decodes to what we meant; any text decodes without reading past its end.
            if (edge::percentDecode(edge::percentEncode(input)) != input) std::abort();
            edge::percentDecode(input);
            break;
        case 2:
        {
            std::string message = edge::framed(input);
            uint32_t declared = (uint32_t(uint8_t(message[1])) << 24) |
                                (uint32_t(uint8_t(message[2])) << 16) | (uint32_t(uint8_t(message[3])) << 8) |
                                uint32_t(uint8_t(message[4]));
            if (message.size() != edge::kPrefix + input.size() || declared != input.size()) std::abort();
            break;
        }
        default:
        {
            const size_t limit = 1 << 20;
            std::string out;
            try
            {
                edge::inflateMessage(input, (data[0] & 4) ? "gzip" : "deflate", limit, out);
            }
            catch (const edge::Refused& refused)
            {
                if (refused.code != edge::Code::RESOURCE_EXHAUSTED) std::abort();
            }
            if (out.size() > limit) std::abort();
        }
    }
    return 0;
}
