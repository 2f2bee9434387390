// The connections to tritonserver's private gRPC socket and to the Python front's: dialled when a call needs
// them, a call's stream submitted, its answer kept (within the byte budgets) for its client.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "transport.h"

namespace edge
{

Upstream* gTriton = nullptr;
Upstream* gPython = nullptr;

Upstream* Upstream::dial(const std::string& address)
{
    // "unix:PATH" (tritonserver's gRPC socket is PATH:0 by Triton's naming; the address carries it).
    if (address.compare(0, 5, "unix:") != 0) return nullptr;
    std::string path = address.substr(5);
    sockaddr_un where{};
    where.sun_family = AF_UNIX;
    if (path.size() >= sizeof where.sun_path) return nullptr;
    std::memcpy(where.sun_path, path.data(), path.size());
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return nullptr;
    // A Unix socket connects at once or not at all (EAGAIN: its backlog is full).
    if (connect(fd, reinterpret_cast<sockaddr*>(&where), sizeof where) != 0)
    {
        close(fd);
        return nullptr;
    }
    auto* up = new Upstream(fd);
    up->setup();
    return up;
}

void Upstream::setup()
{
    nghttp2_session_client_new(&session_, gClientCallbacks, this);
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                         {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 1 << 30);
    start(EPOLLIN | EPOLLOUT);
}

void Upstream::submit(Call* call)
{
    if (!nghttp2_session_check_request_allowed(session_))
    {
        // tritonserver said GOAWAY: this connection finishes its calls, the next ones get a new one.
        Upstream* fresh = dial(this == gTriton ? gConfig.upstream : gConfig.relay);
        if (this == gTriton) gTriton = fresh;
        if (this == gPython) gPython = fresh;
        if (fresh == nullptr) return call->down->refuse(call, Code::UNAVAILABLE, gConfig.unreachable);
        return fresh->submit(call);
    }
    // tritonserver is given the edge's own limit, never the client's deadline: every call it starts runs to
    // its end (see Downstream::detach); the client's deadline is kept here.
    call->upstreamBy = Clock::now() + std::chrono::milliseconds(gLimits.upstreamMs);
    std::string path = gMethodPrefix + call->method, timeout = std::to_string(gLimits.upstreamMs) + "m";
    std::vector<nghttp2_nv> headers = {header(":method", "POST"),
                                       header(":scheme", "http"),
                                       header(":path", path),
                                       header(":authority", "localhost"),
                                       header("content-type", "application/grpc"),
                                       header("te", "trailers"),
                                       header("grpc-timeout", timeout)};
    if (call->hasAdminKey) headers.push_back(header(gConfig.adminHeader, call->adminKey));
    nghttp2_data_provider body;
    body.source.ptr = call;
    body.read_callback = readBody;
    int32_t id = nghttp2_submit_request(session_, nullptr, headers.data(), headers.size(), &body, call);
    if (id < 0) return call->down->refuse(call, Code::UNAVAILABLE, gConfig.unreachable);
    call->up = this;
    call->upId = id;
    calls_.insert(call);
    rearm(call);
    markDirty();
}

ssize_t Upstream::readBody(nghttp2_session*, int32_t, uint8_t* buffer, size_t length, uint32_t* flags,
                           nghttp2_data_source* source, void*)
{
    auto* call = static_cast<Call*>(source->ptr);
    size_t n = std::min(length, call->upstreamBody.size() - call->upstreamSent);
    std::memcpy(buffer, call->upstreamBody.data() + call->upstreamSent, n);
    call->upstreamSent += n;
    if (call->upstreamSent == call->upstreamBody.size())
    {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        std::string().swap(call->upstreamBody);  // all of it is nghttp2's now
        call->upstreamSent = 0;
        account(call);
    }
    return static_cast<ssize_t>(n);
}

int Upstream::onHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                       size_t nameLength, const uint8_t* value, size_t valueLength, uint8_t, void*)
{
    std::string_view key, text;
    Call* call = headerField(session, frame, name, nameLength, value, valueLength, key, text);
    if (call == nullptr) return 0;
    if (key == ":status")
        call->httpStatus = std::atoi(std::string(text).c_str());
    else if (key == "grpc-status")
    {
        call->haveGrpcStatus = true;
        call->grpcStatus = std::atoi(std::string(text).c_str());
    }
    else if (key == "grpc-message")
        call->grpcMessage = percentDecode(text);
    return 0;
}

int Upstream::onData(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data, size_t length, void*)
{
    auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, id));
    // Kept only for a client still there, and within the byte budgets: an answer past them is dropped and
    // the client told RESOURCE_EXHAUSTED when it ends (a 1 KB request can ask for a 4 MB answer).
    if (call == nullptr || call->down == nullptr || call->answerDropped) return 0;
    size_t wanted = call->response.size() + length;
    if (wanted > call->response.capacity())
    {
        wanted = std::max(wanted, call->response.capacity() * 2);
        if (!fits(call, static_cast<int64_t>(wanted - call->response.capacity())))
        {
            call->answerDropped = true;
            std::string().swap(call->response);
            account(call);
            return 0;
        }
        call->response.reserve(wanted);
    }
    call->response.append(reinterpret_cast<const char*>(data), length);
    account(call);
    return 0;
}

int Upstream::onClose(nghttp2_session* session, int32_t id, uint32_t errorCode, void* self)
{
    auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, id));
    if (call != nullptr) static_cast<Upstream*>(self)->ended(call, errorCode);
    return 0;
}

// The upstream stream closed: answer the client from what it sent (or from why it ended).
void Upstream::ended(Call* call, uint32_t errorCode)
{
    nghttp2_session_set_stream_user_data(session_, call->upId, nullptr);
    calls_.erase(call);
    call->up = nullptr;
    rearm(call);
    if (!call->haveGrpcStatus)
    {
        call->haveGrpcStatus = true;
        call->response.clear();
        if (errorCode == NGHTTP2_REFUSED_STREAM || errorCode == NGHTTP2_NO_ERROR || dead_)
            call->grpcStatus = static_cast<int>(Code::UNAVAILABLE), call->grpcMessage = "upstream ended";
        else if (errorCode == NGHTTP2_CANCEL)
            call->grpcStatus = static_cast<int>(Code::CANCELLED), call->grpcMessage = "Cancelled";
        else
            call->grpcStatus = static_cast<int>(Code::INTERNAL),
            call->grpcMessage = "upstream reset the call";
        if (call->httpStatus != 0 && call->httpStatus != 200)
            call->grpcStatus = static_cast<int>(Code::UNAVAILABLE);
    }
    if (call->down != nullptr) call->down->answer(call);
    call->maybeDelete();
}

void Upstream::detach(Call* call, bool cancel)
{
    if (cancel && !dead_)
    {
        nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, call->upId, NGHTTP2_CANCEL);
        markDirty();
    }
    if (!dead_) nghttp2_session_set_stream_user_data(session_, call->upId, nullptr);
    calls_.erase(call);
    call->up = nullptr;
    rearm(call);
}

void Upstream::onDeath()
{
    if (gTriton == this) gTriton = nullptr;
    if (gPython == this) gPython = nullptr;
    for (Call* call : std::vector<Call*>(calls_.begin(), calls_.end())) ended(call, NGHTTP2_NO_ERROR);
}

}  // namespace edge
