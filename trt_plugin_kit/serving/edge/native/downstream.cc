// The public connections: a call's headers and message received within its budgets, dispatched (ModelInfer
// checked here, the other allowed methods relayed to the Python front) and answered.
#include <algorithm>
#include <cstring>

#include "transport.h"

namespace edge
{

std::set<Downstream*> gDownstreams;
nghttp2_session_callbacks* gServerCallbacks = nullptr;
nghttp2_session_callbacks* gClientCallbacks = nullptr;
nghttp2_option* gServerOptions = nullptr;

namespace
{
std::chrono::milliseconds ms(int64_t n)
{
    return std::chrono::milliseconds(n);
}
}  // namespace

Downstream::Downstream(int fd, SSL* ssl, Peer* peer) : Connection(fd, ssl), peer_(peer)
{
    ++peer_->connections;
    nghttp2_session_server_new2(&session_, gServerCallbacks, this, gServerOptions);
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
         static_cast<uint32_t>(gConfig.L("max_grpc_streams_per_connection"))},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(gLimits.maxMetadata)},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 3);
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 1 << 24);
    gDownstreams.insert(this);
    start(EPOLLIN);
}

bool Downstream::overdue(Clock::time_point now)
{
    if (goingAwaySince_ != Clock::time_point{} && now - goingAwaySince_ > std::chrono::seconds(1))
        return die(), true;  // its GOAWAY could not be sent: the socket takes nothing
    if (!requested_ && now - born_ > ms(gLimits.handshakeMs)) return die(), true;
    // A socket that takes nothing of what we send, whatever the peer sends us (PINGs included).
    if (blockedSince() != Clock::time_point{} && now - blockedSince() > ms(gLimits.answerMs))
        return die(), true;
    if (calls_.empty() && goingAwaySince_ == Clock::time_point{} && now - lastCall_ > ms(gLimits.idleMs))
    {
        // Idle: told GOAWAY (a gRPC client dials again when it next calls), closed once that is sent.
        nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
        goingAwaySince_ = now;
        markDirty();
        return true;
    }
    return false;
}

int Downstream::onBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* self)
{
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    auto* down = static_cast<Downstream*>(self);
    down->requested_ = true;
    Call* call = newCall();
    call->down = down;
    call->peer = down->peer_;
    call->downId = frame->hd.stream_id;
    down->calls_.insert(call);
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, call);
    // The body timeout (the HTTP front's): the whole request is in by then, or the call is refused.
    call->requestBy = Clock::now() + ms(gLimits.requestMs);
    rearm(call);
    return 0;
}

int Downstream::onHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                         size_t nameLength, const uint8_t* value, size_t valueLength, uint8_t, void*)
{
    std::string_view key, text;
    Call* call = headerField(session, frame, name, nameLength, value, valueLength, key, text);
    if (call == nullptr) return 0;
    call->metadataBytes += nameLength + valueLength + 32;  // HTTP/2's measure of a header list
    if (call->metadataBytes > static_cast<size_t>(gLimits.maxMetadata))
        return 0;  // refused once the headers are in (onFrame); nothing more of them is kept
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // trailers: nothing we use
    if (key == ":path")
    {
        if (text.size() > gMethodPrefix.size() && text.compare(0, gMethodPrefix.size(), gMethodPrefix) == 0)
            call->method = std::string(text.substr(gMethodPrefix.size()));
        else
            call->method = "?";
    }
    else if (key == "content-type")
        call->contentType = std::string(text);
    else if (key == "grpc-encoding")
        call->encoding = std::string(text);
    else if (key == "grpc-timeout")
    {
        Clock::duration timeout;
        if (parseTimeout(text, timeout))
        {
            call->haveDeadline = true;
            call->deadline = Clock::now() + timeout;
            rearm(call);
        }
    }
    else if (key == gConfig.adminHeader)
    {
        // Only a printable key travels on (grpc's own client refuses to send anything else).
        bool printable = std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
        call->hasAdminKey = printable;
        call->adminKey = printable ? std::string(text) : std::string();
    }
    return 0;
}

int Downstream::onData(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data, size_t length,
                       void*)
{
    auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, id));
    if (call == nullptr || call->refusedEarly || call->answered) return 0;
    size_t limit = static_cast<size_t>(gLimits.maxMessage);
    size_t before = call->in.size();
    if (call->expected == 0 && before + length >= kPrefix)
    {
        // The prefix is in: the declared length is judged before the message is buffered.
        std::string head = call->in;
        head.append(reinterpret_cast<const char*>(data),
                    std::min(length, kPrefix - std::min(before, kPrefix)));
        uint64_t declared = (uint64_t(uint8_t(head[1])) << 24) | (uint64_t(uint8_t(head[2])) << 16) |
                            (uint64_t(uint8_t(head[3])) << 8) | uint64_t(uint8_t(head[4]));
        if (declared > limit)
        {
            call->refusedEarly = true;
            call->down->refuse(call, Code::RESOURCE_EXHAUSTED,
                               "Received message larger than max (" + std::to_string(declared) + " vs. " +
                                   std::to_string(limit) + ")");
            return 0;
        }
        call->expected = kPrefix + declared;
    }
    if (call->expected != 0 && before + length > call->expected)
    {
        call->overflow = true;  // a second message in a unary call
        return 0;
    }
    if (before + length > call->in.capacity())
    {
        // Grown as the bytes come, never past the declared length, within the byte budgets: a client that
        // declares and sends nothing holds nothing; many that send much are refused, not queued.
        size_t wanted = std::max(call->in.capacity() * 2, before + length);
        if (call->expected != 0) wanted = std::min(wanted, call->expected);
        if (!fits(call, static_cast<int64_t>(wanted - call->in.capacity())))
        {
            call->refusedEarly = true;
            std::string().swap(call->in);
            account(call);
            call->down->refuse(call, Code::RESOURCE_EXHAUSTED, gConfig.busyRefusal);
            return 0;
        }
        call->in.reserve(wanted);
    }
    call->in.append(reinterpret_cast<const char*>(data), length);
    account(call);
    return 0;
}

int Downstream::onFrame(nghttp2_session* session, const nghttp2_frame* frame, void* self)
{
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
    {
        auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
        size_t limit = static_cast<size_t>(gLimits.maxMetadata);
        if (call != nullptr && call->metadataBytes > limit)
            static_cast<Downstream*>(self)->refuse(
                call, Code::RESOURCE_EXHAUSTED,
                "the metadata is larger than " + std::to_string(limit) + " bytes");
    }
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    {
        auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
        if (call != nullptr) static_cast<Downstream*>(self)->requestDone(call);
    }
    return 0;
}

int Downstream::onFrameSent(nghttp2_session* session, const nghttp2_frame* frame, void*)
{
    // An answer sent before the client finished its request (a refusal by length): end its stream.
    if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    {
        auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
        if (call != nullptr && !call->requestEnded)
            nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

int Downstream::onClose(nghttp2_session* session, int32_t id, uint32_t, void* self)
{
    auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, id));
    if (call != nullptr) static_cast<Downstream*>(self)->detach(call);
    return 0;
}

void Downstream::detach(Call* call)
{
    call->sending = false;
    if (!dead_) nghttp2_session_set_stream_user_data(session_, call->downId, nullptr);
    calls_.erase(call);
    if (calls_.empty()) lastCall_ = Clock::now();
    held_ -= call->held;  // the call's bytes stay the front's and the peer's until it ends
    call->down = nullptr;
    rearm(call);
    // A client that leaves (or whose deadline passed) does not cancel tritonserver's call: Triton 2.51 dies
    // of calls cancelled on a connection that multiplexes many (SIGSEGV within seconds of calls with
    // millisecond deadlines, measured here; the same clients connected directly did not crash it). The call
    // runs to its end, its answer is dropped, and it counts against the calls in flight until then.
    call->maybeDelete();
}

void Downstream::abandon(Call* call)
{
    // The slot is free now (tritonserver's part is over: only our answer was waiting); the stream's reset
    // closes it, or the connection's end does when the socket takes nothing (overdue()).
    if (call->counted && call->up == nullptr) call->counted = false, --gInFlight, --call->peer->calls;
    call->sending = false;
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, call->downId, NGHTTP2_CANCEL);
    markDirty();
    rearm(call);
}

void Downstream::onDeath()
{
    gDownstreams.erase(this);
    for (Call* call : std::vector<Call*>(calls_.begin(), calls_.end())) detach(call);
    --peer_->connections;
    releasePeer(peer_);
}

void Downstream::requestDone(Call* call)
{
    call->requestEnded = true;
    rearm(call);
    if (call->refusedEarly || call->answered) return;
    dispatch(call);
}

void Downstream::dispatch(Call* call)
{
    if (gInFlight >= gLimits.maxCalls)
        return refuse(call, Code::RESOURCE_EXHAUSTED, gConfig.concurrentRefusal);
    if (peer_->calls >= gLimits.maxCallsPerPeer)
        return refuse(call, Code::RESOURCE_EXHAUSTED, gConfig.peerCallsRefusal);
    ++gInFlight, ++peer_->calls;
    call->counted = true;
    if (call->contentType.compare(0, 16, "application/grpc") != 0)
        return refuse(call, Code::UNIMPLEMENTED, "Method not found!");
    if (call->method != "ModelInfer" && !gConfig.relayed.count(call->method))
        return refuse(call, Code::UNIMPLEMENTED, "Method not found!");
    if (call->overflow || call->expected == 0 || call->in.size() != call->expected)
        return refuse(call, Code::INVALID_ARGUMENT, refusal("malformed"));
    if (call->in[0] == 0) return afterInflating(call);
    if (call->encoding != "gzip" && call->encoding != "deflate")
        return refuse(call, Code::UNIMPLEMENTED,
                      "Compression algorithm '" + call->encoding + "' is not supported");
    // The relayed methods' messages are a few bytes: none needs compressing, and none is inflated here.
    if (call->method != "ModelInfer") return refuse(call, Code::UNIMPLEMENTED, gConfig.compressionRefusal);
    if (!inflateLater(call, static_cast<size_t>(gLimits.maxMessage)))
        return refuse(call, Code::RESOURCE_EXHAUSTED, gConfig.busyRefusal);
    account(call);  // its compressed bytes went to the inflater
}

void Downstream::inflated(Call* call, int status, std::string& message, const std::string& why)
{
    if (call->answered) return;
    if (status != 0) return refuse(call, status == 1 ? Code::INTERNAL : Code::RESOURCE_EXHAUSTED, why);
    if (!fits(call, static_cast<int64_t>(message.capacity())))
        return refuse(call, Code::RESOURCE_EXHAUSTED, gConfig.busyRefusal);
    call->in.swap(message);
    account(call);
    afterInflating(call);
}

void Downstream::afterInflating(Call* call)
{
    if (call->method == "ModelInfer")
        infer(call);
    else
        relay(call);
}

void Downstream::infer(Call* call)
{
    std::string payload;
    try
    {
        std::shared_ptr<const Models> models = std::atomic_load(&gModels);
        payload = checkModelInfer(std::string_view(call->in).substr(kPrefix), *models, call->model);
    }
    catch (const Refused& refused)
    {
        return refuse(call, refused.code, refused.message);
    }
    std::string().swap(call->in);
    call->upstreamBody = framed(payload);
    std::string().swap(payload);
    account(call);
    call->hasAdminKey = false;  // ModelInfer carries no metadata upstream
    if (gTriton == nullptr || gTriton->dead()) gTriton = Upstream::dial(gConfig.upstream);
    if (gTriton == nullptr)
    {
        say("fail " + call->model);  // its socket refuses connections: the Python edge probes the model
        return refuse(call, Code::UNAVAILABLE, gConfig.unreachable);
    }
    gTriton->submit(call);
}

void Downstream::relay(Call* call)
{
    call->upstreamBody = std::move(call->in);
    if (gPython == nullptr || gPython->dead()) gPython = Upstream::dial(gConfig.relay);
    if (gPython == nullptr) return refuse(call, Code::UNAVAILABLE, "the relay is not reachable");
    gPython->submit(call);
}

void Downstream::refuse(Call* call, Code code, const std::string& message)
{
    if (call->answered || call->down == nullptr) return;
    call->answered = true;
    std::string status = std::to_string(static_cast<int>(code)), text = percentEncode(message);
    nghttp2_nv headers[] = {header(":status", "200"), header("content-type", "application/grpc"),
                            header("grpc-status", status), header("grpc-message", text)};
    nghttp2_submit_response(session_, call->downId, headers, 4, nullptr);
    awaitSending(call);
}

void Downstream::awaitSending(Call* call)
{
    call->sending = true;
    call->answerBy = Clock::now() + ms(gLimits.answerMs);
    rearm(call);
    markDirty();
}

ssize_t Downstream::readResponse(nghttp2_session* session, int32_t id, uint8_t* buffer, size_t length,
                                 uint32_t* flags, nghttp2_data_source* source, void*)
{
    auto* call = static_cast<Call*>(source->ptr);
    size_t n = std::min(length, call->response.size() - call->responseSent);
    std::memcpy(buffer, call->response.data() + call->responseSent, n);
    call->responseSent += n;
    if (call->responseSent == call->response.size())
    {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv trailers[] = {header("grpc-status", "0")};  // answers with a message are OK ones
        nghttp2_submit_trailer(session, id, trailers, 1);
        std::string().swap(call->response);  // all of it is nghttp2's now: not held for the client any more
        call->responseSent = 0;
        account(call);
    }
    return static_cast<ssize_t>(n);
}

void Downstream::answer(Call* call)
{
    if (call->answered) return;
    Code code = call->haveGrpcStatus ? static_cast<Code>(call->grpcStatus) : Code::UNKNOWN;
    std::string message = call->grpcMessage;
    if (call->answerDropped) code = Code::RESOURCE_EXHAUSTED, message = gConfig.busyRefusal;
    if (code != Code::OK || call->response.empty())
    {
        if (code == Code::OK) code = Code::INTERNAL, message = "no message in the answer";
        if (call->method == "ModelInfer")
        {
            if (code == Code::UNAVAILABLE || code == Code::DEADLINE_EXCEEDED) say("fail " + call->model);
            std::string lower = message;
            std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
            if (code == Code::UNAVAILABLE && lower.find("restricted") == std::string::npos)
                message = gConfig.unreachable;
        }
        return refuse(call, code, message);
    }
    call->answered = true;
    nghttp2_nv headers[] = {header(":status", "200"), header("content-type", "application/grpc")};
    nghttp2_data_provider body;
    body.source.ptr = call;
    body.read_callback = readResponse;
    nghttp2_submit_response(session_, call->downId, headers, 2, &body);
    awaitSending(call);
}

}  // namespace edge
