// The parts of a ModelInferRequest's rules that are not its order: Python's words for names (repr), UTF-8,
// and typed contents made raw (grpc_front._contents_to_raw).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "request.h"

namespace edge
{

// Python's repr() of a str, for the names in messages (clients see the same words as from grpc_front.py).
std::string repr(std::string_view text)
{
    bool single = text.find('\'') == std::string_view::npos || text.find('"') != std::string_view::npos;
    char quote = single ? '\'' : '"';
    std::string out(1, quote);
    for (unsigned char c : text)
    {
        if (c == '\\' || c == static_cast<unsigned char>(quote))
        {
            out += '\\';
            out += static_cast<char>(c);
        }
        else if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\t')
            out += "\\t";
        else if (c < 0x20 || c == 0x7f)
        {
            char hex[8];
            snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        }
        else
            out += static_cast<char>(c);
    }
    return out + quote;
}

namespace
{
template <typename T, typename Show>
std::string joined(const std::vector<T>& items, Show show)
{
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + show(items[i]);
    return out + "]";
}
}  // namespace

std::string listRepr(const std::vector<std::string>& items)
{
    return joined(items, [](const std::string& item) { return repr(item); });
}
std::string listRepr(const std::vector<int64_t>& items)
{
    return joined(items, [](int64_t item) { return std::to_string(item); });
}

size_t codePoints(std::string_view text)
{
    return std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; });
}

// protobuf refuses a string field that is not UTF-8 (Python's parser does; so do we).
bool validUtf8(std::string_view s)
{
    size_t i = 0, n = s.size();
    while (i < n)
    {
        unsigned char c = s[i];
        int more = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
        if (more < 0 || i + more >= n) return false;
        uint32_t cp = more == 0 ? c : c & (0x3F >> more);
        for (int k = 1; k <= more; ++k)
        {
            unsigned char d = s[i + k];
            if ((d & 0xC0) != 0x80) return false;
            cp = cp << 6 | (d & 0x3F);
        }
        static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
        if (cp < kMin[more] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += more + 1;
    }
    return true;
}

// Python's repr() of a float: the shortest digits that read back as the same double, in fixed notation for
// exponents -4..15 and scientific (two exponent digits at least) otherwise.
std::string pythonFloat(double d)
{
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    char buffer[64];
    auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, d, std::chars_format::scientific);
    (void)error;
    std::string text(buffer, end);  // "-d.ddde-XX"
    std::string sign = text[0] == '-' ? "-" : "";
    if (!sign.empty()) text.erase(0, 1);
    size_t e = text.find('e');
    int exponent = std::stoi(text.substr(e + 1));
    std::string digits = text.substr(0, e);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    if (exponent < -4 || exponent >= 16)
    {
        std::string mantissa = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
        std::string power = std::to_string(std::abs(exponent));
        return sign + mantissa + (exponent < 0 ? "e-" : "e+") + (power.size() < 2 ? "0" : "") + power;
    }
    if (exponent < 0) return sign + "0." + std::string(-exponent - 1, '0') + digits;
    if (digits.size() <= static_cast<size_t>(exponent) + 1)
        return sign + digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    return sign + digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
}

std::string Param::show() const
{
    switch (kind)
    {
        case BOOL:
            return b ? "True" : "False";
        case INT:
            return unsignedHuge ? std::to_string(u) : std::to_string(i);
        case STRING:
            return repr(s);
        case DOUBLE:
            return pythonFloat(d);
        default:
            return "None";
    }
}

// ---------------------------------------------------------------------------------------------- contents

namespace
{

// InferTensorContents' fields by number (1..8): name, unpacked wire type.
const std::pair<const char*, int> kContentFields[] = {
    {"bool_contents", 0},   {"int_contents", 0},  {"int64_contents", 0}, {"uint_contents", 0},
    {"uint64_contents", 0}, {"fp32_contents", 5}, {"fp64_contents", 1},  {"bytes_contents", 2}};

template <typename T>
void append(std::string& out, T value)
{
    out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

void checkContentsFraming(std::string_view part)
{
    Reader r(part, 2);
    while (!r.done())
    {
        uint64_t tag = r.tag();
        int field = tag >> 3, wire = tag & 7;
        if (field < 1 || field > 7 || wire != 2)
        {
            r.skip(field, wire);  // bytes_contents, an unpacked value, or an unknown field
            continue;
        }
        Reader packed(r.bytes(), 3);
        int kind = kContentFields[field - 1].second;  // 0 varint, 5 fixed32, 1 fixed64
        size_t width = kind == 5 ? 4 : kind == 1 ? 8 : 0;
        if (width != 0 && (packed.end - packed.p) % width != 0) throw malformed("DecodeError");
        while (width == 0 && !packed.done()) packed.varint();
    }
}

std::string contentsToRaw(const Input& input, const std::string& where)
{
    const std::string datatype(input.datatype);
    int target = 8;
    std::string numpyType;
    if (datatype != "BYTES")
    {
        auto found = gConfig.contents.find(datatype);
        if (found == gConfig.contents.end())
            throw invalid(refusal("raw_only", {{"where", where}, {"datatype", datatype}}));
        for (int f = 1; f <= 8; ++f)
            if (found->second.first == kContentFields[f - 1].first) target = f;
        numpyType = found->second.second;
    }
    const size_t cap = gConfig.L("max_request_bytes");
    std::string out;
    bool present[9] = {};
    bool overflow = false;
    auto value = [&](int field, Reader& r)
    {
        present[field] = true;
        if (field != target)
        {
            r.skip(field, field == 8 ? 2 : kContentFields[field - 1].second);
            return;
        }
        switch (field)
        {
            case 8:
            {
                std::string_view item = r.bytes();
                append(out, static_cast<uint32_t>(item.size()));
                out.append(item.data(), item.size());
                break;
            }
            case 6:
                append(out, r.fixed<float>());
                break;
            case 7:
                append(out, r.fixed<double>());
                break;
            default:
            {
                uint64_t raw = r.varint();
                int64_t v = field == 1   ? (raw != 0)
                            : field == 2 ? static_cast<int32_t>(raw)
                            : field == 4 ? static_cast<int64_t>(static_cast<uint32_t>(raw))
                                         : static_cast<int64_t>(raw);
                auto inRange = [&](int64_t lo, int64_t hi)
                {
                    if (v < lo || v > hi) overflow = true;
                };
                if (numpyType == "bool")
                    append(out, static_cast<uint8_t>(v != 0));
                else if (numpyType == "int8")
                    inRange(INT8_MIN, INT8_MAX), append(out, static_cast<int8_t>(v));
                else if (numpyType == "int16")
                    inRange(INT16_MIN, INT16_MAX), append(out, static_cast<int16_t>(v));
                else if (numpyType == "int32")
                    append(out, static_cast<int32_t>(v));
                else if (numpyType == "int64")
                    append(out, v);
                else if (numpyType == "uint8")
                    inRange(0, UINT8_MAX), append(out, static_cast<uint8_t>(v));
                else if (numpyType == "uint16")
                    inRange(0, UINT16_MAX), append(out, static_cast<uint16_t>(v));
                else if (numpyType == "uint32")
                    append(out, static_cast<uint32_t>(v));
                else if (numpyType == "uint64")
                    append(out, static_cast<uint64_t>(raw));
                else
                    throw invalid(refusal("raw_only", {{"where", where}, {"datatype", datatype}}));
            }
        }
        if (out.size() > cap)
            throw Refused{Code::RESOURCE_EXHAUSTED,
                          refusal("contents_size", {{"where", where}, {"most", std::to_string(cap)}})};
    };
    Reader r(input.contents, 2);
    while (!r.done())
    {
        uint64_t tag = r.tag();
        int field = tag >> 3, wire = tag & 7;
        if (field < 1 || field > 8)
            r.skip(field, wire);
        else if (wire == 2 && field != 8)
        {
            Reader packed(r.bytes());
            while (!packed.done()) value(field, packed);
        }
        else if (wire == kContentFields[field - 1].second)
            value(field, r);
        else
            r.skip(field, wire);
    }
    if (datatype != "BYTES")
    {
        for (int f = 1; f <= 8; ++f)
            if (present[f] && f != target)
                throw invalid(refusal("contents_field", {{"where", where},
                                                         {"field", std::string(kContentFields[f - 1].first)},
                                                         {"datatype", datatype}}));
        if (overflow)
            throw invalid(refusal("contents_range", {{"where", where},
                                                     {"field", std::string(kContentFields[target - 1].first)},
                                                     {"datatype", datatype}}));
    }
    return out;
}

}  // namespace edge
