// ModelInfer's rules, as grpc_front.py words them: the message parsed by hand (protobuf's wire format), every
// count bounded while it is parsed (request.h), checked against the served model's interface and the limits
// in grpc_front.parse_model_infer's and tensors.check_request's order, and re-encoded as the request
// tritonserver gets.
#include <algorithm>
#include <cstring>

#include "request.h"

namespace edge
{
namespace
{

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

// ---------------------------------------------------------------------------------------------- parsing

// Limits read once per message (gConfig.L is a map lookup).
struct Keep
{
    size_t parameters, inputs, outputs, dims;
    Keep()
        : parameters(gConfig.L("max_parameters") + 1),
          inputs(gConfig.L("max_inputs") + 1),
          outputs(gConfig.L("max_outputs") + 1),
          dims(gConfig.L("max_shape_dims") + 1)
    {
    }
};

Param parseParameterValue(std::string_view data, int depth)
{
    Param value;
    Reader v(data, depth);  // InferParameter: a oneof, the last member set wins (also across parts)
    while (!v.done())
    {
        uint64_t t = v.tag();
        int f = t >> 3, w = t & 7;
        if (f == 1 && w == 0)
            value = Param::of(Param::BOOL), value.b = v.varint() != 0;
        else if (f == 2 && w == 0)
            value = Param::of(Param::INT), value.i = static_cast<int64_t>(v.varint());
        else if (f == 3 && w == 2)
            value = Param::of(Param::STRING), value.s = v.text();
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
            v.skip(f, w);
    }
    return value;
}

// One map entry; the whole entry is read (its UTF-8 judged) even past the keys held, as protobuf would. An
// entry with any other field than its key and value is not an entry of the map (upb keeps it with the
// message's unknown fields, and Python's map never shows it).
void parseParameter(std::string_view entry, int depth, Params& params, const Keep& keep)
{
    std::string_view key;
    Param value;
    bool other = false;
    Reader r(entry, depth);
    while (!r.done())
    {
        uint64_t tag = r.tag();
        int field = tag >> 3, wire = tag & 7;
        if (field == 1 && wire == 2)
            key = r.text();
        else if (field == 2 && wire == 2)
            value = parseParameterValue(r.bytes(), depth + 1);
        else
            other = true, r.skip(field, wire);
    }
    if (!other) params.set(key, value, keep.parameters);
}

void parseShape(Reader& r, int wire, std::vector<int64_t>& shape, const Keep& keep)
{
    // Kept up to one past the most dimensions accepted: more are refused by their count anyway.
    auto add = [&](uint64_t v)
    {
        if (shape.size() < keep.dims) shape.push_back(static_cast<int64_t>(v));
    };
    if (wire == 0)
        add(r.varint());
    else
    {
        Reader packed(r.bytes());
        while (!packed.done()) add(packed.varint());
    }
}

void addContents(Input& input, std::string_view part)
{
    checkContentsFraming(part);
    if (input.contentParts++ == 0)
    {
        input.contents = part;
        return;
    }
    if (input.contentParts == 2) input.mergedContents.assign(input.contents.data(), input.contents.size());
    input.mergedContents.append(part.data(), part.size());
    input.contents = input.mergedContents;
}

void parseInput(std::string_view data, Input& input, const Keep& keep)
{
    Reader r(data, 1);
    while (!r.done())
    {
        uint64_t tag = r.tag();
        int field = tag >> 3, wire = tag & 7;
        if (field == 1 && wire == 2)
            input.name = r.text();
        else if (field == 2 && wire == 2)
            input.datatype = r.text();
        else if (field == 3 && (wire == 0 || wire == 2))
            parseShape(r, wire, input.shape, keep);
        else if (field == 4 && wire == 2)
            parseParameter(r.bytes(), 2, input.params, keep);
        else if (field == 5 && wire == 2)
            addContents(input, r.bytes());
        else
            r.skip(field, wire);
    }
}

void parseOutput(std::string_view data, Output& output, const Keep& keep)
{
    Reader r(data, 1);
    while (!r.done())
    {
        uint64_t tag = r.tag();
        int field = tag >> 3, wire = tag & 7;
        if (field == 1 && wire == 2)
            output.name = r.text();
        else if (field == 2 && wire == 2)
            parseParameter(r.bytes(), 2, output.params, keep);
        else
            r.skip(field, wire);
    }
}

// Fields past the limits are counted, not kept: a message of a million empty inputs costs no memory.
// An input or output not held is still parsed (into a scratch one), for the same DecodeError verdicts.
void parseRequest(std::string_view data, Request& request)
{
    const Keep keep;
    Input spareInput;
    Output spareOutput;
    Reader r(data);
    while (!r.done())
    {
        uint64_t tag = r.tag();
        int field = tag >> 3, wire = tag & 7;
        if (wire != 2 || field < 1 || field > 7)
        {
            r.skip(field, wire);
            continue;
        }
        std::string_view part = field <= 3 ? r.text() : r.bytes();
        if (field == 1)
            request.model = part;
        else if (field == 2)
            request.version = part;
        else if (field == 3)
            request.id = part;
        else if (field == 4)
            parseParameter(part, 1, request.params, keep);
        else if (field == 5)
        {
            bool held = request.inputCount++ < keep.inputs;
            Input& input = held ? request.inputs.emplace_back() : (spareInput = Input(), spareInput);
            parseInput(part, input, keep);
        }
        else if (field == 6)
        {
            bool held = request.outputCount++ < keep.outputs;
            Output& output = held ? request.outputs.emplace_back() : (spareOutput = Output(), spareOutput);
            parseOutput(part, output, keep);
        }
        else if (request.rawCount++ < keep.inputs)
            request.raw.push_back(part);
    }
}

// ---------------------------------------------------------------------------------------------- the checks

std::string whereInput(std::string_view name)
{
    return refusal("where_input", {{"name", repr(name)}});
}

bool validName(std::string_view s)
{
    return std::regex_match(s.begin(), s.end(), gConfig.name);
}

// In the keys' order (a protobuf map has none; grpc_front._parameters sorts them too).
void checkParameters(const Params& params, const char* kind, const std::string& where)
{
    const auto& allowed = gConfig.parameters[kind];
    std::vector<std::pair<std::string_view, Param>> sorted = params.entries;
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, value] : sorted)
    {
        auto found = allowed.find(std::string(key));
        if (found == allowed.end())
            throw invalid(refusal("parameter_unknown", {{"where", where}, {"key", repr(key)}}));
        const std::string& type = found->second;
        bool ok = (type == "bool" && value.kind == Param::BOOL) ||
                  (type == "str" && value.kind == Param::STRING) ||
                  (type == "int" && value.kind == Param::INT && !value.unsignedHuge && value.i >= 0 &&
                   value.i <= gConfig.L("max_request_bytes"));
        if (!ok)
            throw invalid(
                refusal("parameter_value",
                        {{"where", where}, {"key", repr(key)}, {"kind", type}, {"value", value.show()}}));
        if (type == "str" && !validName(value.s))
            throw invalid(refusal("parameter_name", {{"where", where}, {"key", repr(key)}}));
    }
}

void parameterCount(const Params& params, const std::string& where)
{
    const int64_t most = gConfig.L("max_parameters");
    if (static_cast<int64_t>(params.count()) > most)
        throw invalid(refusal("parameter_count", {{"where", where}, {"most", std::to_string(most)}}));
}

// grpc_front.parse_model_infer: the message on its own (names, counts, typed contents made raw).
void checkMessage(Request& request)
{
    if (!validName(request.model)) throw Refused{Code::NOT_FOUND, refusal("unknown_model_name")};
    if (!request.version.empty() &&
        !std::regex_match(request.version.begin(), request.version.end(), gConfig.version))
        throw Refused{Code::NOT_FOUND, refusal("unknown_version_name")};
    parameterCount(request.params, refusal("where_request"));
    const int64_t maxInputs = gConfig.L("max_inputs");
    if (request.inputCount < 1 || static_cast<int64_t>(request.inputCount) > maxInputs)
        throw invalid(refusal("input_count", {{"most", std::to_string(maxInputs)}}));
    if (request.rawCount != 0 && request.rawCount != request.inputCount)
        throw invalid(refusal("raw_count", {{"raw", std::to_string(request.rawCount)},
                                            {"inputs", std::to_string(request.inputCount)}}));
    for (size_t position = 0; position < request.inputs.size(); ++position)
    {
        Input& tensor = request.inputs[position];
        if (!validName(tensor.name))
            throw invalid(refusal("input_name", {{"position", std::to_string(position)}}));
        std::string where = whereInput(tensor.name);
        if (!gConfig.datatypeBytes.count(std::string(tensor.datatype)))
            throw invalid(refusal("unknown_datatype",
                                  {{"where", where}, {"datatype", repr(tensor.datatype.substr(0, 16))}}));
        parameterCount(tensor.params, where);
        if (request.rawCount != 0)
        {
            if (tensor.contentParts != 0) throw invalid(refusal("contents_and_raw", {{"where", where}}));
            tensor.hasRaw = true;
            tensor.raw = request.raw[position];
        }
        else if (tensor.contentParts != 0)
        {
            tensor.converted = contentsToRaw(tensor, where);
            tensor.hasRaw = true;
            tensor.raw = tensor.converted;
        }
    }
    for (const Output& output : request.outputs)
        parameterCount(output.params, refusal("where_output", {{"name", repr(output.name)}}));
}

// The model named, its version, the request's own fields and the inputs' names.
const Model& checkModel(const Request& request, const Models& models)
{
    auto found = models.find(std::string(request.model));
    if (found == models.end())
        throw Refused{Code::NOT_FOUND,
                      refusal("unknown_model", {{"model", repr(request.model.substr(0, 128))}})};
    const Model& model = found->second;
    if (!request.version.empty() && !model.versions.count(std::string(request.version)))
        throw Refused{Code::NOT_FOUND, refusal("no_version", {{"model", repr(model.name)},
                                                              {"version", repr(request.version)}})};
    const int64_t maxId = gConfig.L("max_id_length");
    if (static_cast<int64_t>(codePoints(request.id)) > maxId)
        throw invalid(refusal("id_length", {{"most", std::to_string(maxId)}}));
    checkParameters(request.params, "request", refusal("where_request_parameters"));
    std::vector<std::string> names, expected;
    for (const Input& tensor : request.inputs) names.emplace_back(tensor.name);
    for (const auto& [name, spec] : model.inputs) expected.push_back(name);
    std::sort(names.begin(), names.end());
    if (names != expected)
        throw invalid(refusal(
            "input_names",
            {{"model", repr(model.name)}, {"expected", listRepr(expected)}, {"names", listRepr(names)}}));
    return model;
}

std::string show(unsigned __int128 v)
{
    if (v >= (static_cast<unsigned __int128>(1) << 64)) return std::string("more than 2^64");
    return std::to_string(static_cast<uint64_t>(v));
}

// The shape against the model's dims and batch; its element count (saturated at 2^100).
unsigned __int128 checkShape(const Input& tensor, const TensorSpec& spec, const Model& model, int64_t& batch,
                             const std::string& where)
{
    const std::vector<int64_t>& shape = tensor.shape;
    const int64_t maxDim = gConfig.L("max_dimension");
    const size_t maxDims = gConfig.L("max_shape_dims");
    if (shape.size() > maxDims)
        throw invalid(refusal("shape_length", {{"where", where}, {"most", std::to_string(maxDims)}}));
    for (int64_t dim : shape)
        if (dim < 0 || dim > maxDim)
            throw invalid(
                refusal("dimension",
                        {{"where", where}, {"dim", std::to_string(dim)}, {"most", std::to_string(maxDim)}}));
    std::vector<int64_t> dims = shape;
    if (model.maxBatchSize > 0)
    {
        if (shape.size() != spec.dims.size() + 1)
        {
            std::string joined;
            for (size_t i = 0; i < spec.dims.size(); ++i)
                joined += (i ? ", " : "") + std::to_string(spec.dims[i]);
            throw invalid(
                refusal("batch_missing", {{"where", where}, {"shape", listRepr(shape)}, {"dims", joined}}));
        }
        if (shape[0] < 1 || shape[0] > model.maxBatchSize)
            throw invalid(refusal("batch_size", {{"where", where},
                                                 {"batch", std::to_string(shape[0])},
                                                 {"shape", listRepr(shape)},
                                                 {"most", std::to_string(model.maxBatchSize)}}));
        if (batch >= 0 && shape[0] != batch)
            throw invalid(refusal(
                "batch_differs",
                {{"where", where}, {"batch", std::to_string(shape[0])}, {"other", std::to_string(batch)}}));
        batch = shape[0];
        dims.erase(dims.begin());
    }
    bool match = dims.size() == spec.dims.size();
    for (size_t i = 0; match && i < dims.size(); ++i) match = spec.dims[i] == -1 || spec.dims[i] == dims[i];
    if (!match)
        throw invalid(
            refusal("dims", {{"where", where}, {"shape", listRepr(shape)}, {"dims", listRepr(spec.dims)}}));
    // At most max_shape_dims factors of <= max_dimension each: counted in 128 bits and saturated, and
    // compared right away (the bounds were checked above, before this arithmetic).
    unsigned __int128 elements = 1;
    const unsigned __int128 saturated = static_cast<unsigned __int128>(1) << 100;
    for (int64_t dim : shape) elements = std::min(saturated, elements * static_cast<uint64_t>(dim));
    return elements;
}

// tensors.count_bytes_elements: 4-byte little-endian lengths that account for every byte.
void checkBytesElements(const Input& tensor, unsigned __int128 elements, const std::string& where)
{
    unsigned __int128 count = 0;
    size_t offset = 0, end = tensor.raw.size();
    while (offset < end && count <= elements)
    {
        if (end - offset < 4) throw invalid(refusal("bytes_length", {{"where", where}}));
        uint32_t length;
        std::memcpy(&length, tensor.raw.data() + offset, 4);
        if (length > end - offset - 4)
            throw invalid(refusal("bytes_element", {{"where", where}, {"length", std::to_string(length)}}));
        offset += 4 + static_cast<size_t>(length);
        ++count;
    }
    if (count != elements)
        throw invalid(refusal("bytes_count", {{"where", where},
                                              {"shape", listRepr(tensor.shape)},
                                              {"elements", show(elements)},
                                              {"count", show(count)}}));
}

// One input against its spec: datatype, shape, size, parameters and data. Returns its data's bytes.
size_t checkInput(const Input& tensor, const Model& model, int64_t& batch)
{
    const TensorSpec& spec = model.inputs.at(std::string(tensor.name));
    std::string where = whereInput(tensor.name);
    if (tensor.datatype != spec.datatype)
        throw invalid(
            refusal("datatype",
                    {{"where", where}, {"datatype", repr(tensor.datatype)}, {"expected", spec.datatype}}));
    unsigned __int128 elements = checkShape(tensor, spec, model, batch, where);
    const int64_t maxBytes = gConfig.L("max_request_bytes");
    const int item = gConfig.datatypeBytes.at(std::string(tensor.datatype));
    if (item > 0 && elements * item > static_cast<unsigned __int128>(maxBytes))
        throw Refused{Code::RESOURCE_EXHAUSTED, refusal("shape_bytes", {{"where", where},
                                                                        {"shape", listRepr(tensor.shape)},
                                                                        {"size", show(elements * item)},
                                                                        {"most", std::to_string(maxBytes)}})};
    checkParameters(tensor.params, "input", where);
    if (!tensor.hasRaw)
    {
        bool region = false;
        for (const auto& [key, value] : tensor.params.entries) region |= key == "shared_memory_region";
        if (!region) throw invalid(refusal("no_data", {{"where", where}}));
        return 0;
    }
    if (!tensor.params.empty()) throw invalid(refusal("data_and_region", {{"where", where}}));
    if (item == 0)
        checkBytesElements(tensor, elements, where);
    else if (tensor.raw.size() != static_cast<uint64_t>(elements) * item)
        throw invalid(refusal("data_size", {{"where", where},
                                            {"shape", listRepr(tensor.shape)},
                                            {"datatype", std::string(tensor.datatype)},
                                            {"size", show(elements * item)},
                                            {"got", std::to_string(tensor.raw.size())}}));
    return tensor.raw.size();
}

// grpc_front.parse_model_infer, then tensors.check_request, in their order.
const Model& check(Request& request, const Models& models)
{
    checkMessage(request);
    const Model& model = checkModel(request, models);
    uint64_t total = 0;
    int64_t batch = -1;
    for (const Input& tensor : request.inputs) total += checkInput(tensor, model, batch);
    const int64_t maxBytes = gConfig.L("max_request_bytes");
    if (total > static_cast<uint64_t>(maxBytes))
        throw Refused{
            Code::RESOURCE_EXHAUSTED,
            refusal("inputs_bytes", {{"total", std::to_string(total)}, {"most", std::to_string(maxBytes)}})};
    const int64_t maxOutputs = gConfig.L("max_outputs");
    if (static_cast<int64_t>(request.outputCount) > maxOutputs)
        throw invalid(refusal("output_count", {{"most", std::to_string(maxOutputs)}}));
    for (const Output& output : request.outputs)
    {
        if (!model.outputs.count(std::string(output.name)))
            throw invalid(refusal("no_output", {{"model", repr(model.name)}, {"output", repr(output.name)}}));
        checkParameters(output.params, "output", refusal("where_output", {{"name", repr(output.name)}}));
    }
    return model;
}

// ---------------------------------------------------------------------------------------------- re-encoding

void putParameters(std::string& out, int field, const Params& params)
{
    for (const auto& [key, value] : params.entries)
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
    if (withData != 0 && withData != request.inputs.size()) throw invalid(refusal("mixed_data"));
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
        parseRequest(message, request);
        check(request, models);
        model = std::string(request.model);
        return encode(request);
    }
    catch (const Refused&)
    {
        throw;
    }
    catch (const std::exception&)
    {
        throw Refused{Code::INVALID_ARGUMENT, refusal("malformed")};
    }
}

}  // namespace edge
