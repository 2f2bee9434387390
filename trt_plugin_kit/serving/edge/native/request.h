// A ModelInferRequest as the compiled front parses it (model_infer.cc) and the helpers its parts share
// (model_request.cc): protobuf's wire format read by hand, views of the received bytes, and every count
// bounded while it is parsed (a message of a million parameters, raw contents or dimensions keeps a handful).
#pragma once

#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edge.h"

namespace edge
{

inline Refused invalid(std::string message)
{
    return {Code::INVALID_ARGUMENT, std::move(message)};
}
inline Refused malformed(const char* why)
{
    return invalid(refusal("malformed_why", {{"why", why}}));
}

// Python's repr() of a str, for the names in messages (clients see the same words as from grpc_front.py).
std::string repr(std::string_view text);
std::string listRepr(const std::vector<std::string>& items);
std::string listRepr(const std::vector<int64_t>& items);
size_t codePoints(std::string_view text);
// protobuf refuses a string field that is not UTF-8 (Python's parser does; so do we).
bool validUtf8(std::string_view s);

// ---------------------------------------------------------------------------------------------- wire format

// protobuf's nesting limit (upb's, as Python's parser applies it): messages and groups at most this deep.
constexpr int kMaxDepth = 100;

struct Reader
{
    const uint8_t* p;
    const uint8_t* end;
    int depth;  // of the message read: the request is 0, an input 1, an input's parameter value 3
    explicit Reader(std::string_view s, int depth = 0)
        : p(reinterpret_cast<const uint8_t*>(s.data())), end(p + s.size()), depth(depth)
    {
    }
    bool done() const { return p >= end; }
    uint64_t varint()
    {
        uint64_t value = 0;
        for (int shift = 0; shift < 70; shift += 7)
        {
            if (p >= end) throw malformed("DecodeError");
            uint8_t byte = *p++;
            value |= static_cast<uint64_t>(byte & 0x7F) << shift;
            if (!(byte & 0x80)) return value;
        }
        throw malformed("DecodeError");
    }
    // A field's tag: its number (1 up) and wire type; protobuf refuses number 0 and tags past 32 bits.
    uint64_t tag()
    {
        uint64_t value = varint();
        if ((value >> 3) == 0 || value > 0xFFFFFFFFu) throw malformed("DecodeError");
        return value;
    }
    std::string_view bytes()
    {
        uint64_t length = varint();
        if (length > static_cast<uint64_t>(end - p)) throw malformed("DecodeError");
        std::string_view out(reinterpret_cast<const char*>(p), length);
        p += length;
        return out;
    }
    // A string field: UTF-8 or the message is malformed.
    std::string_view text()
    {
        std::string_view value = bytes();
        if (!validUtf8(value)) throw malformed("DecodeError");
        return value;
    }
    template <typename T>
    T fixed()
    {
        if (static_cast<size_t>(end - p) < sizeof(T)) throw malformed("DecodeError");
        T value;
        std::memcpy(&value, p, sizeof(T));
        p += sizeof(T);
        return value;
    }
    // A field not used: its value read past. Groups (unknown fields of an old encoding) are skipped as
    // protobuf skips them, nested within the depth limit, so that both rules take the same messages.
    void skip(int field, int wire)
    {
        switch (wire)
        {
            case 0:
                varint();
                break;
            case 1:
                fixed<uint64_t>();
                break;
            case 2:
                bytes();
                break;
            case 3:
                skipGroup(field);
                break;
            case 5:
                fixed<uint32_t>();
                break;
            default:
                throw malformed("DecodeError");  // an end of group not begun, or no wire type
        }
    }
    void skipGroup(int field)
    {
        std::vector<int> open{field};
        while (!open.empty())
        {
            if (depth + static_cast<int>(open.size()) > kMaxDepth) throw malformed("DecodeError");
            uint64_t read = tag();
            int f = static_cast<int>(read >> 3), w = static_cast<int>(read & 7);
            if (w == 4)
            {
                if (f != open.back()) throw malformed("DecodeError");
                open.pop_back();
            }
            else if (w == 3)
                open.push_back(f);
            else
                skip(f, w);
        }
    }
};

// ---------------------------------------------------------------------------------------------- the request

struct Param
{
    enum Kind
    {
        NONE,
        BOOL,
        INT,
        STRING,
        DOUBLE
    } kind = NONE;
    bool b = false;
    int64_t i = 0;
    bool unsignedHuge = false;  // a uint64_param above 2^63 (out of every range we accept)
    uint64_t u = 0;
    std::string_view s;
    double d = 0;
    static Param of(Kind kind)
    {
        Param p;
        p.kind = kind;
        return p;
    }
    std::string show() const;
};

// A parameter map, distinct keys, the last one sent wins. At most `keep` (max_parameters + 1) keys are held:
// one more than any accepted request has, so that the count check still refuses, and each entry's lookup is
// over a handful (100,000 distinct keys cost 18.9 s of the front's thread when every key was kept).
struct Params
{
    std::vector<std::pair<std::string_view, Param>> entries;
    bool more = false;  // distinct keys past the ones held
    size_t count() const { return entries.size() + (more ? 1 : 0); }
    bool empty() const { return entries.empty(); }
    void set(std::string_view key, const Param& value, size_t keep)
    {
        for (auto& [k, v] : entries)
            if (k == key)
            {
                v = value;
                return;
            }
        if (entries.size() < keep)
            entries.emplace_back(key, value);
        else
            more = true;
    }
};

struct Input
{
    std::string_view name, datatype;
    std::vector<int64_t> shape;  // at most max_shape_dims + 1 held
    Params params;
    // The contents field: its parts, sent more than once, merge as protobuf merges them (their bytes
    // concatenated), so that a message of many parts holds no more than its own size.
    size_t contentParts = 0;
    std::string_view contents;
    std::string mergedContents;
    bool hasRaw = false;
    std::string_view raw;
    std::string converted;  // raw bytes made from typed contents
};

struct Output
{
    std::string_view name;
    Params params;
};

struct Request
{
    std::string_view model, version, id;
    Params params;
    std::vector<Input> inputs;                             // at most max_inputs + 1 held
    std::vector<Output> outputs;                           // at most max_outputs + 1 held
    std::vector<std::string_view> raw;                     // at most max_inputs + 1 held
    size_t inputCount = 0, outputCount = 0, rawCount = 0;  // as sent
};

// A contents part read as protobuf reads it when the message is parsed (every part, whatever its datatype
// turns out to be): DecodeError where its framing is broken, as Python's parser says before any rule.
void checkContentsFraming(std::string_view part);

// Typed contents -> the raw little-endian layout (np.asarray(values, dtype).tobytes(), as grpc_front.py makes
// it), bounded in output by max_request_bytes while it is made.
std::string contentsToRaw(const Input& input, const std::string& where);

}  // namespace edge
