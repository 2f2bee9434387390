// The edge's public gRPC port, compiled: grpc_front.py's rules for ModelInfer at a cost Python cannot reach.
//
// Started and supervised by the Python edge (edge/native_front.py), which writes everything
// this program knows on its stdin: the limits (edge/limits.py), the names and datatypes the protocol allows
// (edge/tensors.py), the methods served, the sockets, and later the served models' interfaces
// (edge/upstream.py). Nothing here is a copy of those facts; the protocol's field numbers are the only
// constants.
//
// ModelInfer is parsed, checked against the model's interface and re-encoded here, then sent to
// tritonserver's private gRPC socket. Every other allowed method is relayed as received to the Python front
// (GrpcFront) on a private Unix socket, with only the admin-key metadata: the admin rules and readiness keep
// their one home there, and those calls are rare. Methods not in the list: UNIMPLEMENTED here.
//
// ModelInferRequest is parsed by hand (protobuf's wire format) rather than through code generated from
// tritonclient's descriptors: it is the one message this program reads or writes, its tensors stay views of
// the received bytes until they are re-encoded, and no generated Triton code (or its libprotobuf ABI) has to
// be built and kept in step with the Python side's.
//
// stdout: "listening PORT" once the port is bound (or "error WHY" and exit 1), then "fail MODEL" when a
// ModelInfer to tritonserver ends UNAVAILABLE or DEADLINE_EXCEEDED (the Python edge probes the model).
// stdin at EOF (the Python edge is gone): this program stops.

#include <absl/synchronization/mutex.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace
{

// ---------------------------------------------------------------------------------------------- what we know

struct TensorSpec
{
    std::string datatype;
    std::vector<int64_t> dims;  // without the batch dimension; -1 variable
};

struct Model
{
    std::string name;
    int64_t maxBatchSize = 0;
    std::map<std::string, TensorSpec> inputs;  // sorted: its key order is sorted(model.inputs)
    std::set<std::string> outputs;
    std::set<std::string> versions;
};
using Models = std::unordered_map<std::string, Model>;

struct Config
{
    std::map<std::string, int64_t> limit;  // edge/limits.py, by lower-case name
    std::string namePattern, versionPattern;
    std::regex name, version;
    std::map<std::string, int> datatypeBytes;  // 0: BYTES (length-prefixed)
    // datatype -> (InferTensorContents field name, numpy type name) as grpc_front._CONTENTS says
    std::map<std::string, std::pair<std::string, std::string>> contents;
    // "request" / "input" / "output" -> parameter name -> "bool" / "int" / "str"
    std::map<std::string, std::map<std::string, std::string>> parameters;
    std::set<std::string> relayed;  // methods the Python front answers
    std::string service, listen, upstream, relay, adminHeader, unreachable, concurrentRefusal;
    std::string tlsCert, tlsKey, tlsRoot;
    bool tls = false, tlsMutual = false;

    int64_t L(const char* key) const
    {
        auto found = limit.find(key);
        if (found == limit.end()) throw std::runtime_error(std::string("no limit ") + key + " given");
        return found->second;
    }
};

Config gConfig;
std::shared_ptr<const Models> gModels = std::make_shared<Models>();
std::mutex gStdoutLock;

void say(const std::string& line)
{
    std::lock_guard<std::mutex> hold(gStdoutLock);
    std::string text = line + "\n";
    ssize_t ignored = write(STDOUT_FILENO, text.data(), text.size());
    (void)ignored;
}

// ---------------------------------------------------------------------------------------------- refusals

struct Refused
{
    grpc::StatusCode code;
    std::string message;
};

Refused invalid(std::string message)
{
    return {grpc::StatusCode::INVALID_ARGUMENT, std::move(message)};
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
            throw Refused{grpc::StatusCode::RESOURCE_EXHAUSTED,
                          where + ": its contents need more than " + std::to_string(cap) +
                              " bytes; this server accepts at most " + std::to_string(cap) +
                              " bytes per request"};
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
    if (!validName(request.model)) throw Refused{grpc::StatusCode::NOT_FOUND, "unknown model"};
    if (!request.version.empty() &&
        !std::regex_match(request.version.begin(), request.version.end(), gConfig.version))
        throw Refused{grpc::StatusCode::NOT_FOUND, "unknown model version"};
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
        throw Refused{grpc::StatusCode::NOT_FOUND,
                      "Request for unknown model: " + repr(request.model.substr(0, 128)) + " is not found"};
    const Model& model = found->second;
    if (!request.version.empty() && !model.versions.count(std::string(request.version)))
        throw Refused{grpc::StatusCode::NOT_FOUND,
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
            throw Refused{grpc::StatusCode::RESOURCE_EXHAUSTED,
                          where + ": shape " + listRepr(shape) + " needs " + show(elements * item) +
                              " bytes; this server accepts at most " + std::to_string(maxBytes) +
                              " bytes per request"};
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
        throw Refused{grpc::StatusCode::RESOURCE_EXHAUSTED, "the inputs hold " + std::to_string(total) +
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

// ---------------------------------------------------------------------------------------------- the server

std::string flatten(const grpc::ByteBuffer& buffer)
{
    std::vector<grpc::Slice> slices;
    buffer.Dump(&slices);
    std::string out;
    out.reserve(buffer.Length());
    for (const grpc::Slice& slice : slices)
        out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    return out;
}

grpc::ByteBuffer bufferOf(std::string&& bytes)
{
    auto* owned = new std::string(std::move(bytes));
    grpc::Slice slice(
        owned->data(), owned->size(), [](void* p) { delete static_cast<std::string*>(p); }, owned);
    return grpc::ByteBuffer(&slice, 1);
}

// One completion queue serves both sides (the public port and the calls to tritonserver and to the Python
// front), driven by one thread: the callback API's hand-offs between gRPC's threads, or two threads on this
// queue, cost more CPU than the checks themselves (measured here, gRPC l2norm: 81-87 us per call with the
// callback API or two threads, 49-68 us with one). A 32 MiB message holds the others for its parse (ms).
struct Edge
{
    grpc::AsyncGenericService service;
    std::unique_ptr<grpc::ServerCompletionQueue> queue;
    std::unique_ptr<grpc::GenericStub> triton, python;
    std::string prefix;
    std::atomic<int64_t> inFlight{0};

    Edge()
    {
        grpc::ChannelArguments upstream;
        upstream.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // a ModelInfer is never retried; no retry buffers
        upstream.SetMaxReceiveMessageSize(-1);
        upstream.SetMaxSendMessageSize(static_cast<int>(gConfig.L("max_grpc_message_bytes")));
        triton = std::make_unique<grpc::GenericStub>(
            grpc::CreateCustomChannel(gConfig.upstream, grpc::InsecureChannelCredentials(), upstream));
        python = std::make_unique<grpc::GenericStub>(
            grpc::CreateCustomChannel(gConfig.relay, grpc::InsecureChannelCredentials(), upstream));
        prefix = "/" + gConfig.service + "/";
    }
};

class Call
{
public:
    explicit Call(Edge* edge) : edge_(edge), stream_(&context_)
    {
        edge_->service.RequestCall(&context_, &stream_, edge_->queue.get(), edge_->queue.get(), this);
    }

    // The queue's event for this call, in the order the states are entered.
    void proceed(bool ok)
    {
        switch (state_)
        {
            case State::kRequested:
                if (!ok)  // the server is shutting down
                {
                    delete this;
                    return;
                }
                new Call(edge_);  // the next call's slot
                start();
                return;
            case State::kReading:
                if (!ok)
                    finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed request"));
                else if (method_ == "ModelInfer")
                    infer();
                else
                    relay();
                return;
            case State::kUpstream:
                answer();
                return;
            case State::kFinishing:
                edge_->inFlight.fetch_sub(1);
                delete this;
                return;
        }
    }

private:
    enum class State
    {
        kRequested,
        kReading,
        kUpstream,
        kFinishing
    };

    void start()
    {
        if (edge_->inFlight.fetch_add(1) >= gConfig.L("max_grpc_concurrent_rpcs"))
        {
            finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, gConfig.concurrentRefusal));
            return;
        }
        const std::string& path = context_.method();
        if (path.compare(0, edge_->prefix.size(), edge_->prefix) == 0)
            method_ = path.substr(edge_->prefix.size());
        if (method_ != "ModelInfer" && !gConfig.relayed.count(method_))
        {
            finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "Method not found!"));
            return;
        }
        state_ = State::kReading;
        stream_.Read(&request_, this);
    }

    void infer()
    {
        std::string payload;
        try
        {
            std::string message = flatten(request_);
            request_.Clear();
            Request request;
            Counts counts = parseRequest(message, request);
            std::shared_ptr<const Models> models = std::atomic_load(&gModels);
            check(request, counts, *models);
            model_ = std::string(request.model);
            payload = encode(request);
        }
        catch (const Refused& refused)
        {
            finish(grpc::Status(refused.code, refused.message));
            return;
        }
        catch (const std::exception&)
        {
            finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed request"));
            return;
        }
        upstreamRequest_ = bufferOf(std::move(payload));
        forward(edge_->triton.get());
    }

    void relay()
    {
        // Only the admin key travels on, and only as a valid metadata value (grpc's client would fail the
        // call with a line break in it; the Python front then refuses it like any wrong key).
        const auto& metadata = context_.client_metadata();
        auto range = metadata.equal_range(gConfig.adminHeader);
        if (range.first != range.second)
        {
            auto last = range.first;
            for (auto it = range.first; it != range.second; ++it) last = it;
            std::string value(last->second.data(), last->second.size());
            bool printable =
                std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
            if (printable) upstreamContext_.AddMetadata(gConfig.adminHeader, value);
        }
        upstreamRequest_ = std::move(request_);
        forward(edge_->python.get());
    }

    void forward(grpc::GenericStub* stub)
    {
        auto limit = std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(gConfig.L("upstream_timeout_ms")));
        upstreamContext_.set_deadline(std::min(limit, context_.deadline()));
        state_ = State::kUpstream;
        reader_ = stub->PrepareUnaryCall(&upstreamContext_, edge_->prefix + method_, upstreamRequest_,
                                         edge_->queue.get());
        reader_->StartCall();
        reader_->Finish(&response_, &upstreamStatus_, this);
    }

    void answer()
    {
        if (upstreamStatus_.ok())
        {
            state_ = State::kFinishing;
            stream_.WriteAndFinish(response_, grpc::WriteOptions(), grpc::Status::OK, this);
            return;
        }
        if (method_ != "ModelInfer")
        {
            finish(upstreamStatus_);
            return;
        }
        grpc::StatusCode code = upstreamStatus_.error_code();
        std::string details = upstreamStatus_.error_message();
        if (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED)
            say("fail " + model_);
        std::string lower = details;
        std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
        if (code == grpc::StatusCode::UNAVAILABLE && lower.find("restricted") == std::string::npos)
            details = gConfig.unreachable;
        finish(grpc::Status(code, details));
    }

    void finish(const grpc::Status& status)
    {
        state_ = State::kFinishing;
        stream_.Finish(status, this);
    }

    Edge* edge_;
    State state_ = State::kRequested;
    grpc::GenericServerContext context_;
    grpc::GenericServerAsyncReaderWriter stream_;
    grpc::ByteBuffer request_, upstreamRequest_, response_;
    grpc::ClientContext upstreamContext_;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader_;
    grpc::Status upstreamStatus_;
    std::string method_, model_;
};

// ---------------------------------------------------------------------------------------------- stdin

// "key value" lines until "end"; value is the rest of the line.
bool readBlock(std::vector<std::pair<std::string, std::string>>& lines)
{
    std::string line;
    while (std::getline(std::cin, line))
    {
        if (line == "end") return true;
        auto space = line.find(' ');
        lines.emplace_back(line.substr(0, space), space == std::string::npos ? "" : line.substr(space + 1));
    }
    return false;
}

std::vector<std::string> words(const std::string& text)
{
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void configure(const std::vector<std::pair<std::string, std::string>>& lines)
{
    for (const auto& [key, value] : lines)
    {
        std::vector<std::string> w = words(value);
        if (key == "limit")
            gConfig.limit[w.at(0)] = std::stoll(w.at(1));
        else if (key == "name_pattern")
            gConfig.name = std::regex(value, std::regex::ECMAScript | std::regex::optimize);
        else if (key == "version_pattern")
            gConfig.version = std::regex(value, std::regex::ECMAScript | std::regex::optimize);
        else if (key == "datatype")
            gConfig.datatypeBytes[w.at(0)] = std::stoi(w.at(1));
        else if (key == "contents")
            gConfig.contents[w.at(0)] = {w.at(1), w.at(2)};
        else if (key == "parameter")
            gConfig.parameters[w.at(0)][w.at(1)] = w.at(2);
        else if (key == "relay_method")
            gConfig.relayed.insert(value);
        else if (key == "service")
            gConfig.service = value;
        else if (key == "listen")
            gConfig.listen = value;
        else if (key == "upstream")
            gConfig.upstream = value;
        else if (key == "relay")
            gConfig.relay = value;
        else if (key == "admin_header")
            gConfig.adminHeader = value;
        else if (key == "unreachable")
            gConfig.unreachable = value;
        else if (key == "concurrent_refusal")
            gConfig.concurrentRefusal = value;
        else if (key == "tls_cert")
            gConfig.tls = true, gConfig.tlsCert = value;
        else if (key == "tls_key")
            gConfig.tlsKey = value;
        else if (key == "tls_root")
            gConfig.tlsRoot = value;
        else if (key == "tls_mutual")
            gConfig.tlsMutual = value == "1";
        else
            throw std::runtime_error("unknown configuration line " + key);
    }
}

// "model NAME MAX_BATCH VERSION..." / "input NAME DATATYPE DIM..." / "output NAME", the block replacing all.
std::shared_ptr<const Models> readModels(const std::vector<std::pair<std::string, std::string>>& lines)
{
    auto models = std::make_shared<Models>();
    Model* current = nullptr;
    for (const auto& [key, value] : lines)
    {
        std::vector<std::string> w = words(value);
        if (key == "model")
        {
            current = &(*models)[w.at(0)];
            current->name = w.at(0);
            current->maxBatchSize = std::stoll(w.at(1));
            current->versions.insert(w.begin() + 2, w.end());
        }
        else if (key == "input" && current)
        {
            TensorSpec& spec = current->inputs[w.at(0)];
            spec.datatype = w.at(1);
            for (size_t i = 2; i < w.size(); ++i) spec.dims.push_back(std::stoll(w[i]));
        }
        else if (key == "output" && current)
            current->outputs.insert(w.at(0));
        else
            throw std::runtime_error("unknown model line " + key);
    }
    return models;
}

}  // namespace

int main()
{
    std::ios::sync_with_stdio(false);
    // Debian builds Abseil without NDEBUG: every lock of gRPC's then goes through the deadlock detector's
    // graph (about 7 % of this program's CPU, measured with perf). gRPC's own release builds leave it off.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    std::vector<std::pair<std::string, std::string>> lines;
    std::unique_ptr<grpc::Server> server;
    Edge* edge = nullptr;
    std::vector<std::thread> threads;
    try
    {
        if (!readBlock(lines)) throw std::runtime_error("the configuration ended early");
        configure(lines);
        for (const char* key :
             {"max_request_bytes", "max_grpc_message_bytes", "max_dimension", "max_inputs", "max_outputs",
              "max_id_length", "max_parameters", "max_shape_dims", "upstream_timeout_ms",
              "max_grpc_concurrent_rpcs", "max_grpc_streams_per_connection", "max_grpc_metadata_bytes"})
            gConfig.L(key);
        std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
        if (gConfig.tls)
        {
            grpc::SslServerCredentialsOptions options(
                gConfig.tlsMutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                  : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
            options.pem_key_cert_pairs.push_back({readFile(gConfig.tlsKey), readFile(gConfig.tlsCert)});
            if (!gConfig.tlsRoot.empty()) options.pem_root_certs = readFile(gConfig.tlsRoot);
            credentials = grpc::SslServerCredentials(options);
        }
        edge = new Edge();
        grpc::ServerBuilder builder;
        int port = 0;
        builder.AddListeningPort(gConfig.listen, credentials, &port);
        // The length prefix is checked against this before the message is buffered (grpc core).
        builder.SetMaxReceiveMessageSize(static_cast<int>(gConfig.L("max_grpc_message_bytes")));
        builder.SetMaxSendMessageSize(-1);
        builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                                   static_cast<int>(gConfig.L("max_grpc_streams_per_connection")));
        builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE,
                                   static_cast<int>(gConfig.L("max_grpc_metadata_bytes")));
        builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
        builder.RegisterAsyncGenericService(&edge->service);
        edge->queue = builder.AddCompletionQueue();
        server = builder.BuildAndStart();
        if (!server || port == 0) throw std::runtime_error("the port is taken or the address is not local");
        say("listening " + std::to_string(port));
        new Call(edge);  // the first call waiting to be accepted; each accepted call queues the next
        threads.emplace_back(
            [edge]
            {
                void* tag;
                bool ok;
                while (edge->queue->Next(&tag, &ok)) static_cast<Call*>(tag)->proceed(ok);
            });
    }
    catch (const std::exception& error)
    {
        say(std::string("error ") + error.what());
        return 1;
    }
    // Model blocks until stdin ends (the Python edge is gone, or closed it to stop us).
    try
    {
        for (;;)
        {
            lines.clear();
            if (!readBlock(lines)) break;
            std::atomic_store(&gModels, readModels(lines));
        }
    }
    catch (const std::exception& error)
    {
        say(std::string("error ") + error.what());
    }
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    edge->queue->Shutdown();
    for (std::thread& thread : threads) thread.join();
    return 0;
}
