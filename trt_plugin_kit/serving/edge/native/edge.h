// What the edge's compiled gRPC front shares between its parts: the configuration and models the Python edge
// writes on stdin (grpc_edge.cc), the ModelInfer rules (model_infer.cc) and the transport
// (grpc_transport.cc).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <istream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace edge
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
    std::string service, listen, upstream, relay, adminHeader, unreachable;
    // What a client is told past a budget (edge/limits.py words them, for both fronts).
    std::string concurrentRefusal, peerCallsRefusal, busyRefusal, compressionRefusal;
    // What an inference request is told, by rule: edge/policy.py's REFUSALS, "{field}" templates.
    std::map<std::string, std::string, std::less<>> refusals;
    std::string tlsCert, tlsKey, tlsRoot;
    bool tls = false, tlsMutual = false;

    int64_t L(const char* key) const
    {
        auto found = limit.find(key);
        if (found == limit.end()) throw std::runtime_error(std::string("no limit ") + key + " given");
        return found->second;
    }
};

extern Config gConfig;

// The words of refusal `key` (edge/policy.py's REFUSALS, on stdin) with each {field} filled: no refusal text
// is written in C++, so that both fronts read the same (test_edge_native.py holds them to it).
std::string refusal(std::string_view key,
                    std::initializer_list<std::pair<std::string_view, std::string>> fields = {});
extern std::shared_ptr<const Models> gModels;  // swapped whole (std::atomic_load/store) when stdin says so

// A line on stdout for the Python edge ("listening PORT", "fail MODEL", "error WHY").
void say(const std::string& line);

// stdin's blocks (config.cc): "key value" lines until "end" (false: the input ended first); the
// configuration block into gConfig; a model block as the Models it replaces all with.
using Lines = std::vector<std::pair<std::string, std::string>>;
bool readBlock(std::istream& in, Lines& lines);
void configure(const Lines& lines);
std::shared_ptr<const Models> readModels(const Lines& lines);

// ---------------------------------------------------------------------------------------------- refusals

// gRPC's status codes (the protocol's numbers).
enum class Code : int
{
    OK = 0,
    CANCELLED = 1,
    UNKNOWN = 2,
    INVALID_ARGUMENT = 3,
    DEADLINE_EXCEEDED = 4,
    NOT_FOUND = 5,
    PERMISSION_DENIED = 7,
    RESOURCE_EXHAUSTED = 8,
    UNIMPLEMENTED = 12,
    INTERNAL = 13,
    UNAVAILABLE = 14,
    UNAUTHENTICATED = 16
};

struct Refused
{
    Code code;
    std::string message;
};

// ModelInfer's rules (model_infer.cc): the message parsed, checked against the served models and re-encoded
// as the request tritonserver gets; the model's name in `model`. Throws Refused with the client's answer.
std::string checkModelInfer(std::string_view message, const Models& models, std::string& model);

// The transport (grpc_transport.cc): binds the public port (its number in `port`; throws when it cannot),
// then serve() answers until stopServing() is called from another thread.
void openPublicPort(int& port);
void serve();
void stopServing();

}  // namespace edge
