// What the Python edge writes on stdin (edge/native_front.py): the configuration block, then model blocks;
// read here into gConfig and Models. Shared by the front (grpc_edge.cc) and the fuzz targets (fuzz/).
#include <unistd.h>

#include <iostream>
#include <mutex>
#include <sstream>

#include "edge.h"

namespace edge
{

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

// ---------------------------------------------------------------------------------------------- stdin

// "key value" lines until "end"; value is the rest of the line.
bool readBlock(std::istream& in, std::vector<std::pair<std::string, std::string>>& lines)
{
    std::string line;
    while (std::getline(in, line))
    {
        if (line == "end") return true;
        auto space = line.find(' ');
        lines.emplace_back(line.substr(0, space), space == std::string::npos ? "" : line.substr(space + 1));
    }
    return false;
}

namespace
{
std::vector<std::string> words(const std::string& text)
{
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

}  // namespace

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
        else if (key == "peer_calls_refusal")
            gConfig.peerCallsRefusal = value;
        else if (key == "busy_refusal")
            gConfig.busyRefusal = value;
        else if (key == "compression_refusal")
            gConfig.compressionRefusal = value;
        else if (key == "refusal")
            gConfig.refusals[w.at(0)] = value.substr(value.find(' ') + 1);
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

std::string refusal(std::string_view key,
                    std::initializer_list<std::pair<std::string_view, std::string>> fields)
{
    auto found = gConfig.refusals.find(key);
    if (found == gConfig.refusals.end())
        throw std::runtime_error("no refusal " + std::string(key) + " given");
    const std::string& text = found->second;
    std::string out;
    for (size_t at = 0; at < text.size();)
    {
        size_t open = text.find('{', at), close = text.find('}', open);
        if (open == std::string::npos || close == std::string::npos)
        {
            out.append(text, at, std::string::npos);
            break;
        }
        out.append(text, at, open - at);
        std::string_view name(text.data() + open + 1, close - open - 1);
        const std::string* value = nullptr;
        for (const auto& [field, filled] : fields)
            if (field == name) value = &filled;
        if (value == nullptr) throw std::runtime_error("refusal " + std::string(key) + " has no field given");
        out += *value;
        at = close + 1;
    }
    return out;
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

}  // namespace edge
