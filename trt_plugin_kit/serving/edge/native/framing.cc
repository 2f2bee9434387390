// gRPC's own layer over HTTP/2: the 5-byte message prefix, grpc-message's percent-encoding, grpc-timeout and
// gzip/deflate messages (inflated on the inflater's thread, inflater.cc). Pure functions of their input: the
// fuzz target (fuzz/) runs them as they are.
#include <zlib.h>

#include <algorithm>

#include "transport.h"

namespace edge
{

std::string framed(std::string_view message)
{
    std::string out;
    out.reserve(kPrefix + message.size());
    out += '\0';
    uint32_t n = static_cast<uint32_t>(message.size());
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xFF);
    out.append(message.data(), message.size());
    return out;
}

// grpc-message is percent-encoded on the wire (the gRPC HTTP/2 protocol).
std::string percentEncode(std::string_view text)
{
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : text)
    {
        if (c >= 0x20 && c <= 0x7E && c != '%')
            out += static_cast<char>(c);
        else
            out += '%', out += hex[c >> 4], out += hex[c & 15];
    }
    return out;
}
std::string percentDecode(std::string_view text)
{
    auto value = [](char c) -> int
    {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    for (size_t i = 0; i < text.size(); ++i)
    {
        if (text[i] == '%' && i + 2 < text.size() && value(text[i + 1]) >= 0 && value(text[i + 2]) >= 0)
        {
            out += static_cast<char>(value(text[i + 1]) * 16 + value(text[i + 2]));
            i += 2;
        }
        else
            out += text[i];
    }
    return out;
}

// grpc-timeout: up to 8 digits and a unit (Hours, Minutes, Seconds, milli, micro, nano); false when
// malformed. Capped at 10^9 s, so that the deadline fits the clock.
bool parseTimeout(std::string_view value, Clock::duration& timeout)
{
    static const std::map<char, double> kSecondsPerUnit = {{'H', 3600.0}, {'M', 60.0}, {'S', 1.0},
                                                           {'m', 1e-3},   {'u', 1e-6}, {'n', 1e-9}};
    if (value.size() < 2 || value.size() > 9) return false;
    auto unit = kSecondsPerUnit.find(value.back());
    if (unit == kSecondsPerUnit.end()) return false;
    int64_t n = 0;
    for (char c : value.substr(0, value.size() - 1))
    {
        if (c < '0' || c > '9') return false;
        n = n * 10 + (c - '0');
    }
    std::chrono::duration<double> seconds(std::min(static_cast<double>(n) * unit->second, 1e9));
    timeout = std::chrono::duration_cast<Clock::duration>(seconds);
    return true;
}

// A gzip or deflate message, inflated to at most `limit` bytes (gRPC's message compression).
bool inflateMessage(std::string_view in, const std::string& encoding, size_t limit, std::string& out)
{
    z_stream z{};
    if (inflateInit2(&z, encoding == "gzip" ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK) return false;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    out.clear();
    char chunk[65536];
    int rc = Z_OK;
    while (rc == Z_OK)
    {
        z.next_out = reinterpret_cast<Bytef*>(chunk);
        z.avail_out = sizeof chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        size_t produced = sizeof chunk - z.avail_out;
        if (out.size() + produced > limit)
        {
            inflateEnd(&z);
            throw Refused{Code::RESOURCE_EXHAUSTED, "Received message larger than max (more than " +
                                                        std::to_string(limit) + " bytes inflated)"};
        }
        out.append(chunk, produced);
        if (rc == Z_BUF_ERROR && z.avail_in == 0) break;
    }
    inflateEnd(&z);
    return rc == Z_STREAM_END;
}

}  // namespace edge
