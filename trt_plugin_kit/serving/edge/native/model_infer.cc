// ModelInfer's rules, as grpc_front.py words them: the message parsed by hand (protobuf's wire format),
// checked against the served model's interface and the limits, and re-encoded as the request tritonserver
// gets.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "edge.h"

namespace edge
{
namespace
{

Refused invalid(std::string message)
{
    return {Code::INVALID_ARGUMENT, std::move(message)};
}
Refused malformed(const char* why)
{
    return invalid(std::string("malformed request (") + why + ")");
}

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

template <typename T>
std::string listRepr(const std::vector<T>& items)
{
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i)
    {
        if (i) out += ", ";
        if constexpr (std::is_same_v<T, std::string>)
            out += repr(items[i]);
        else
            out += std::to_string(items[i]);
    }
    return out + "]";
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

// ---------------------------------------------------------------------------------------------- wire format

struct Reader
{
    const uint8_t* p;
    const uint8_t* end;
    explicit Reader(std::string_view s) : p(reinterpret_cast<const uint8_t*>(s.data())), end(p + s.size()) {}
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
    std::string_view bytes()
    {
        uint64_t length = varint();
        if (length > static_cast<uint64_t>(end - p)) throw malformed("DecodeError");
        std::string_view out(reinterpret_cast<const char*>(p), length);
        p += length;
        return out;
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
    void skip(int wire)
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
            case 5:
                fixed<uint32_t>();
                break;
            default:
                throw malformed("DecodeError");  // groups are not in this protocol
        }
    }
};

void putVarint(std::string& out, uint64_t value)
{
    while (value >= 0x80)
    {
        out += static_cast<char>((value & 0x7F) | 0x80);
        value >>= 7;
    }
    out += static_cast<char>(value);
}
void putTag(std::string& out, int field, int wire)
{
    putVarint(out, static_cast<uint64_t>(field) << 3 | wire);
}
void putBytes(std::string& out, int field, std::string_view value)
{
    putTag(out, field, 2);
    putVarint(out, value.size());
    out.append(value.data(), value.size());
}

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
    std::string show() const
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
            {
                std::ostringstream text;
                text << d;
                return text.str();
            }
            default:
                return "None";
        }
    }
};
using Params = std::vector<std::pair<std::string_view, Param>>;  // distinct keys, the last one sent wins

struct Input
{
    std::string_view name, datatype;
    std::vector<int64_t> shape;
    Params params;
    std::vector<std::string_view> contents;  // the parts of a contents field sent more than once merge
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
    std::vector<Input> inputs;
    std::vector<Output> outputs;
    std::vector<std::string_view> raw;
};

std::string_view text(Reader& r)
{
    std::string_view value = r.bytes();
    if (!validUtf8(value)) throw malformed("DecodeError");
    return value;
}

void parseParameter(std::string_view entry, Params& params)
{
    std::string_view key;
    Param value;
    Reader r(entry);
    while (!r.done())
    {
        uint64_t tag = r.varint();
        int field = tag >> 3, wire = tag & 7;
        if (field == 1 && wire == 2)
            key = text(r);
        else if (field == 2 && wire == 2)
        {
            Reader v(r.bytes());  // InferParameter: a oneof, the last member set wins (also across parts)
            while (!v.done())
            {
                uint64_t t = v.varint();
                int f = t >> 3, w = t & 7;
                if (f == 1 && w == 0)
                    value = Param::of(Param::BOOL), value.b = v.varint() != 0;
                else if (f == 2 && w == 0)
                    value = Param::of(Param::INT), value.i = static_cast<int64_t>(v.varint());
                else if (f == 3 && w == 2)
                    value = Param::of(Param::STRING), value.s = text(v);
                else if (f == 4 && w == 1)
                    value = Param::of(Param::DOUBLE), value.d = v.fixed<double>();
                else if (f == 5 && w == 0)
                {
                    value = Param::of(Param::INT);
                    value.u = v.varint();
                    value.unsignedHuge = value.u > static_cast<uint64_t>(INT64_MAX);
                    value.i = static_cast<int64_t>(value.u);
                }
                else
                    v.skip(w);
            }
        }
        else
            r.skip(wire);
    }
    for (auto& [k, v] : params)
        if (k == key)
        {
            v = value;
            return;
        }
    params.emplace_back(key, value);
}

void parseShape(Reader& r, int wire, std::vector<int64_t>& shape)
{
    // Kept up to one past the most dimensions accepted: more are refused by their count anyway.
    const size_t keep = gConfig.L("max_shape_dims") + 1;
    auto add = [&](uint64_t v)
    {
        if (shape.size() < keep) shape.push_back(static_cast<int64_t>(v));
    };
    if (wire == 0)
        add(r.varint());
    else
    {
        Reader packed(r.bytes());
        while (!packed.done()) add(packed.varint());
    }
}

void parseInput(std::string_view data, Input& input)
{
    Reader r(data);
    while (!r.done())
    {
        uint64_t tag = r.varint();
        int field = tag >> 3, wire = tag & 7;
        if (field == 1 && wire == 2)
            input.name = text(r);
        else if (field == 2 && wire == 2)
            input.datatype = text(r);
        else if (field == 3 && (wire == 0 || wire == 2))
            parseShape(r, wire, input.shape);
        else if (field == 4 && wire == 2)
            parseParameter(r.bytes(), input.params);
        else if (field == 5 && wire == 2)
            input.contents.push_back(r.bytes());
        else
            r.skip(wire);
    }
}

void parseOutput(std::string_view data, Output& output)
{
    Reader r(data);
    while (!r.done())
    {
        uint64_t tag = r.varint();
        int field = tag >> 3, wire = tag & 7;
        if (field == 1 && wire == 2)
            output.name = text(r);
        else if (field == 2 && wire == 2)
            parseParameter(r.bytes(), output.params);
        else
            r.skip(wire);
    }
}

// Fields past the limits are counted, not kept: a message of a million empty inputs costs no memory.
struct Counts
{
    size_t inputs = 0, outputs = 0;
};

Counts parseRequest(std::string_view data, Request& request)
{
    Counts counts;
    const size_t keepInputs = gConfig.L("max_inputs") + 1, keepOutputs = gConfig.L("max_outputs") + 1;
    Reader r(data);
    while (!r.done())
    {
        uint64_t tag = r.varint();
        int field = tag >> 3, wire = tag & 7;
        if (wire != 2 || field < 1 || field > 7)
        {
            r.skip(wire);
            continue;
        }
        switch (field)
        {
            case 1:
                request.model = text(r);
                break;
            case 2:
                request.version = text(r);
                break;
            case 3:
                request.id = text(r);
                break;
            case 4:
                parseParameter(r.bytes(), request.params);
                break;
            case 5:
            {
                std::string_view part = r.bytes();
                if (counts.inputs++ < keepInputs) parseInput(part, request.inputs.emplace_back());
                break;
            }
            case 6:
            {
                std::string_view part = r.bytes();
                if (counts.outputs++ < keepOutputs) parseOutput(part, request.outputs.emplace_back());
                break;
            }
            case 7:
                request.raw.push_back(r.bytes());
                break;
        }
    }
    return counts;
}

// ---------------------------------------------------------------------------------------------- contents

// InferTensorContents' fields by number (1..8): name, unpacked wire type.
const std::pair<const char*, int> kContentFields[] = {
    {"bool_contents", 0},   {"int_contents", 0},  {"int64_contents", 0}, {"uint_contents", 0},
    {"uint64_contents", 0}, {"fp32_contents", 5}, {"fp64_contents", 1},  {"bytes_contents", 2}};

template <typename T>
void append(std::string& out, T value)
{
    out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Typed contents -> the raw little-endian layout (np.asarray(values, dtype).tobytes(), as grpc_front.py makes
// it), bounded in output by max_request_bytes while it is made.
std::string contentsToRaw(const Input& input, const std::string& where)
{
    const std::string datatype(input.datatype);
    int target = 8;
    std::string numpyType;
    if (datatype != "BYTES")
    {
        auto found = gConfig.contents.find(datatype);
        if (found == gConfig.contents.end())
            throw invalid(where + ": " + datatype + " must be sent in raw_input_contents");
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
            r.skip(field == 8 ? 2 : kContentFields[field - 1].second);
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
                    throw invalid(where + ": " + datatype + " must be sent in raw_input_contents");
            }
        }
        if (out.size() > cap)
            throw Refused{Code::RESOURCE_EXHAUSTED, where + ": its contents need more than " +
                                                        std::to_string(cap) +
                                                        " bytes; this server accepts at most " +
                                                        std::to_string(cap) + " bytes per request"};
    };
    for (std::string_view part : input.contents)
    {
        Reader r(part);
        while (!r.done())
        {
            uint64_t tag = r.varint();
            int field = tag >> 3, wire = tag & 7;
            if (field < 1 || field > 8)
                r.skip(wire);
            else if (wire == 2 && field != 8)
            {
                Reader packed(r.bytes());
                while (!packed.done()) value(field, packed);
            }
            else if (wire == kContentFields[field - 1].second)
                value(field, r);
            else
                r.skip(wire);
        }
    }
    if (datatype != "BYTES")
    {
        for (int f = 1; f <= 8; ++f)
            if (present[f] && f != target)
                throw invalid(where + ": " + kContentFields[f - 1].first + " does not carry " + datatype);
        if (overflow)
            throw invalid(where + ": a value of " + kContentFields[target - 1].first +
                          " is out of range for " + datatype);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------- the checks

std::string whereInput(std::string_view name)
{
    return "input " + repr(name);
}

void checkParameters(const Params& params, const char* kind, const std::string& where)
{
    const auto& allowed = gConfig.parameters[kind];
    for (const auto& [key, value] : params)
    {
        auto found = allowed.find(std::string(key));
        if (found == allowed.end())
            throw invalid(where + ": parameter " + repr(key) + " is not accepted by this server");
        const std::string& type = found->second;
        bool ok = (type == "bool" && value.kind == Param::BOOL) ||
                  (type == "str" && value.kind == Param::STRING) ||
                  (type == "int" && value.kind == Param::INT && !value.unsignedHuge && value.i >= 0 &&
                   value.i <= gConfig.L("max_request_bytes"));
        if (!ok)
            throw invalid(where + ": parameter " + repr(key) + " must be a " + type + " in range, got " +
                          value.show());
        if (type == "str" && !std::regex_match(value.s.begin(), value.s.end(), gConfig.name))
            throw invalid(where + ": parameter " + repr(key) + " is not a valid name");
    }
}

bool validName(std::string_view s)
{
    return std::regex_match(s.begin(), s.end(), gConfig.name);
}

// grpc_front.parse_model_infer, then tensors.check_request, in their order.
const Model& check(Request& request, const Counts& counts, const Models& models)
{
    const int64_t maxParameters = gConfig.L("max_parameters");
    if (!validName(request.model)) throw Refused{Code::NOT_FOUND, "unknown model"};
    if (!request.version.empty() &&
        !std::regex_match(request.version.begin(), request.version.end(), gConfig.version))
        throw Refused{Code::NOT_FOUND, "unknown model version"};
    auto tooMany = [&](const Params& p, const std::string& where)
    {
        if (static_cast<int64_t>(p.size()) > maxParameters)
            throw invalid(where + ": at most " + std::to_string(maxParameters) + " parameters");
    };
    tooMany(request.params, "the request");
    const int64_t maxInputs = gConfig.L("max_inputs");
    if (counts.inputs < 1 || static_cast<int64_t>(counts.inputs) > maxInputs)
        throw invalid("the request needs 1.." + std::to_string(maxInputs) + " inputs");
    if (!request.raw.empty() && request.raw.size() != request.inputs.size())
        throw invalid(std::to_string(request.raw.size()) + " raw_input_contents for " +
                      std::to_string(request.inputs.size()) + " inputs");
    for (size_t position = 0; position < request.inputs.size(); ++position)
    {
        Input& tensor = request.inputs[position];
        if (!validName(tensor.name))
            throw invalid("inputs[" + std::to_string(position) + "] needs a valid name");
        std::string where = whereInput(tensor.name);
        if (!gConfig.datatypeBytes.count(std::string(tensor.datatype)))
            throw invalid(where + ": unknown datatype " + repr(tensor.datatype.substr(0, 16)));
        tooMany(tensor.params, where);
        if (!request.raw.empty())
        {
            if (!tensor.contents.empty()) throw invalid(where + ": both contents and raw_input_contents");
            tensor.hasRaw = true;
            tensor.raw = request.raw[position];
        }
        else if (!tensor.contents.empty())
        {
            tensor.converted = contentsToRaw(tensor, where);
            tensor.hasRaw = true;
            tensor.raw = tensor.converted;
        }
    }
    for (const Output& output : request.outputs) tooMany(output.params, "output " + repr(output.name));

    // tensors.check_request
    auto found = models.find(std::string(request.model));
    if (found == models.end())
        throw Refused{Code::NOT_FOUND,
                      "Request for unknown model: " + repr(request.model.substr(0, 128)) + " is not found"};
    const Model& model = found->second;
    if (!request.version.empty() && !model.versions.count(std::string(request.version)))
        throw Refused{Code::NOT_FOUND,
                      "model " + repr(model.name) + " has no version " + repr(request.version)};
    const int64_t maxId = gConfig.L("max_id_length");
    if (static_cast<int64_t>(codePoints(request.id)) > maxId)
        throw invalid("request id longer than " + std::to_string(maxId) + " characters");
    checkParameters(request.params, "request", "request");
    std::vector<std::string> names, expected;
    for (const Input& tensor : request.inputs) names.emplace_back(tensor.name);
    for (const auto& [name, spec] : model.inputs) expected.push_back(name);
    std::vector<std::string> sortedNames = names;
    std::sort(sortedNames.begin(), sortedNames.end());
    if (sortedNames != expected)
        throw invalid("model " + repr(model.name) + " takes inputs " + listRepr(expected) +
                      ", the request has " + listRepr(sortedNames));
    const int64_t maxBytes = gConfig.L("max_request_bytes"), maxDim = gConfig.L("max_dimension");
    const size_t maxDims = gConfig.L("max_shape_dims");
    uint64_t total = 0;
    int64_t batch = -1;
    for (Input& tensor : request.inputs)
    {
        const TensorSpec& spec = model.inputs.at(std::string(tensor.name));
        std::string where = whereInput(tensor.name);
        if (tensor.datatype != spec.datatype)
            throw invalid(where + ": datatype " + repr(tensor.datatype) + ", the model expects " +
                          spec.datatype);
        const std::vector<int64_t>& shape = tensor.shape;
        if (shape.size() > maxDims)
            throw invalid(where + ": 'shape' must be a list of at most " + std::to_string(maxDims) +
                          " dimensions");
        for (int64_t dim : shape)
            if (dim < 0 || dim > maxDim)
                throw invalid(where + ": dimension " + std::to_string(dim) +
                              " of shape is not an integer in 0.." + std::to_string(maxDim));
        std::vector<int64_t> dims = shape;
        if (model.maxBatchSize > 0)
        {
            std::vector<std::string> specDims;
            for (int64_t d : spec.dims) specDims.push_back(std::to_string(d));
            if (shape.size() != spec.dims.size() + 1)
            {
                std::string joined;
                for (size_t i = 0; i < specDims.size(); ++i) joined += (i ? ", " : "") + specDims[i];
                throw invalid(where + ": shape " + listRepr(shape) + " needs [batch, " + joined +
                              "] (no batch dimension?)");
            }
            if (shape[0] < 1 || shape[0] > model.maxBatchSize)
                throw invalid(where + ": batch size " + std::to_string(shape[0]) + " of shape " +
                              listRepr(shape) + " is not in 1.." + std::to_string(model.maxBatchSize));
            if (batch >= 0 && shape[0] != batch)
                throw invalid(where + ": batch size " + std::to_string(shape[0]) +
                              " differs from the other inputs' " + std::to_string(batch));
            batch = shape[0];
            dims.erase(dims.begin());
        }
        bool match = dims.size() == spec.dims.size();
        for (size_t i = 0; match && i < dims.size(); ++i)
            match = spec.dims[i] == -1 || spec.dims[i] == dims[i];
        if (!match)
            throw invalid(where + ": shape " + listRepr(shape) + " does not match the model's dims " +
                          listRepr(spec.dims));
        // At most max_shape_dims factors of <= max_dimension each: counted in 128 bits and saturated, and
        // compared right away (the bounds were checked above, before this arithmetic).
        unsigned __int128 elements = 1;
        const unsigned __int128 saturated = static_cast<unsigned __int128>(1) << 100;
        for (int64_t dim : shape) elements = std::min(saturated, elements * static_cast<uint64_t>(dim));
        auto show = [](unsigned __int128 v)
        {
            if (v >= (static_cast<unsigned __int128>(1) << 64)) return std::string("more than 2^64");
            return std::to_string(static_cast<uint64_t>(v));
        };
        const int item = gConfig.datatypeBytes.at(std::string(tensor.datatype));
        if (item > 0 && elements * item > static_cast<unsigned __int128>(maxBytes))
            throw Refused{Code::RESOURCE_EXHAUSTED, where + ": shape " + listRepr(shape) + " needs " +
                                                        show(elements * item) +
                                                        " bytes; this server accepts at most " +
                                                        std::to_string(maxBytes) + " bytes per request"};
        checkParameters(tensor.params, "input", where);
        if (!tensor.hasRaw)
        {
            bool region = false;
            for (const auto& [key, value] : tensor.params) region |= key == "shared_memory_region";
            if (!region) throw invalid(where + " has no data");
            continue;
        }
        if (!tensor.params.empty()) throw invalid(where + ": data and a shared-memory region at once");
        if (item > 0)
        {
            if (tensor.raw.size() != static_cast<uint64_t>(elements) * item)
                throw invalid(where + ": shape " + listRepr(shape) + " of " + std::string(tensor.datatype) +
                              " needs " + show(elements * item) + " bytes, got " +
                              std::to_string(tensor.raw.size()));
        }
        else
        {
            // tensors.count_bytes_elements: 4-byte little-endian lengths that account for every byte
            unsigned __int128 count = 0;
            size_t offset = 0, end = tensor.raw.size();
            while (offset < end && count <= elements)
            {
                if (end - offset < 4) throw invalid(where + ": BYTES data ends inside an element's length");
                uint32_t length;
                std::memcpy(&length, tensor.raw.data() + offset, 4);
                if (length > end - offset - 4)
                    throw invalid(where + ": a BYTES element claims " + std::to_string(length) +
                                  " bytes past the end of the data");
                offset += 4 + static_cast<size_t>(length);
                ++count;
            }
            if (count != elements)
                throw invalid(where + ": shape " + listRepr(shape) + " declares " + show(elements) +
                              " elements but the data holds " + show(count));
        }
        total += tensor.raw.size();
    }
    if (total > static_cast<uint64_t>(maxBytes))
        throw Refused{Code::RESOURCE_EXHAUSTED, "the inputs hold " + std::to_string(total) +
                                                    " bytes; this server accepts at most " +
                                                    std::to_string(maxBytes)};
    const int64_t maxOutputs = gConfig.L("max_outputs");
    if (static_cast<int64_t>(counts.outputs) > maxOutputs)
        throw invalid("at most " + std::to_string(maxOutputs) + " outputs per request");
    for (const Output& output : request.outputs)
    {
        if (!model.outputs.count(std::string(output.name)))
            throw invalid("model " + repr(model.name) + " has no output " + repr(output.name));
        checkParameters(output.params, "output", "output " + repr(output.name));
    }
    return model;
}

// ---------------------------------------------------------------------------------------------- re-encoding

void putParameters(std::string& out, int field, const Params& params)
{
    for (const auto& [key, value] : params)
    {
        std::string parameter, entry;
        if (value.kind == Param::BOOL)
            putTag(parameter, 1, 0), putVarint(parameter, value.b);
        else if (value.kind == Param::INT)
            putTag(parameter, 2, 0), putVarint(parameter, static_cast<uint64_t>(value.i));
        else
            putBytes(parameter, 3, value.s);  // only these three kinds pass checkParameters
        putBytes(entry, 1, key);
        putBytes(entry, 2, parameter);
        putBytes(out, field, entry);
    }
}

// grpc_front.encode_model_infer: a fresh message from what was parsed and checked.
std::string encode(const Request& request)
{
    size_t rawBytes = 0, withData = 0;
    for (const Input& tensor : request.inputs) rawBytes += tensor.raw.size(), withData += tensor.hasRaw;
    if (withData != 0 && withData != request.inputs.size())
        throw invalid("inputs in shared memory and inputs with data cannot be mixed in one request");
    std::string out;
    out.reserve(rawBytes + 1024);
    if (!request.model.empty()) putBytes(out, 1, request.model);
    if (!request.version.empty()) putBytes(out, 2, request.version);
    if (!request.id.empty()) putBytes(out, 3, request.id);
    putParameters(out, 4, request.params);
    for (const Input& tensor : request.inputs)
    {
        std::string entry, shape;
        putBytes(entry, 1, tensor.name);
        putBytes(entry, 2, tensor.datatype);
        for (int64_t dim : tensor.shape) putVarint(shape, static_cast<uint64_t>(dim));
        if (!shape.empty()) putBytes(entry, 3, shape);
        putParameters(entry, 4, tensor.params);
        putBytes(out, 5, entry);
    }
    for (const Output& output : request.outputs)
    {
        std::string entry;
        if (!output.name.empty()) putBytes(entry, 1, output.name);
        putParameters(entry, 2, output.params);
        putBytes(out, 6, entry);
    }
    for (const Input& tensor : request.inputs)
        if (tensor.hasRaw) putBytes(out, 7, tensor.raw);
    return out;
}

}  // namespace

std::string checkModelInfer(std::string_view message, const Models& models, std::string& model)
{
    try
    {
        Request request;
        Counts counts = parseRequest(message, request);
        check(request, counts, models);
        model = std::string(request.model);
        return encode(request);
    }
    catch (const Refused&)
    {
        throw;
    }
    catch (const std::exception&)
    {
        throw Refused{Code::INVALID_ARGUMENT, "malformed request"};
    }
}

}  // namespace edge
