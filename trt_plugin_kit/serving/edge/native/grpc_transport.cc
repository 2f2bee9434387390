// The transport of the edge's compiled gRPC front: gRPC over HTTP/2 (nghttp2) on the public port, and to
// tritonserver's and the Python front's private Unix sockets, in one thread (see grpc_edge.cc for the whole).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "edge.h"

namespace edge
{
namespace
{

// ---------------------------------------------------------------------------------------------- framing

using Clock = std::chrono::steady_clock;
constexpr size_t kPrefix = 5;  // a gRPC message's prefix: compressed flag, 4-byte big-endian length

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

// ---------------------------------------------------------------------------------------------- the loop

// One thread, one epoll set: the public connections (HTTP/2 server sessions, nghttp2) and the connections to
// tritonserver and to the Python front (client sessions). Every hand-off between threads costs more CPU than
// the checks themselves. The gRPC C++ front this replaced (one completion-queue thread) took 109-120 us per
// l2norm call, two thirds of it gRPC core; this loop 54-56 us, measured side by side (docs/SECURITY.md).
struct Watched
{
    virtual void onEvents(uint32_t events) = 0;
    virtual ~Watched() = default;
};

int gEpoll = -1;
std::string gMethodPrefix;  // "/SERVICE/"
std::atomic<bool> gStopping{false};
int64_t gInFlight = 0;

void watch(int op, int fd, uint32_t events, Watched* who)
{
    epoll_event event{};
    event.events = events;
    event.data.ptr = who;
    epoll_ctl(gEpoll, op, fd, &event);
}

struct Call;
class Connection;
std::vector<Connection*> gDirty, gDead;

// An HTTP/2 connection over a socket (TLS when ssl is given): reads feed nghttp2, what nghttp2 has to send is
// written once per loop turn (flush), so that the frames of many calls share a write.
class Connection : public Watched
{
public:
    Connection(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
    ~Connection() override
    {
        if (session_) nghttp2_session_del(session_);
        if (ssl_) SSL_free(ssl_);
        if (fd_ >= 0) close(fd_);
    }

    void onEvents(uint32_t events) override
    {
        if (dead_) return;
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP) || (ssl_ && (events & EPOLLOUT))) readSome();
        if (!dead_) markDirty();
    }

    void markDirty()
    {
        if (!dirty_ && !dead_)
        {
            dirty_ = true;
            gDirty.push_back(this);
        }
    }

    // Send what nghttp2 has, as far as the socket takes it.
    void flush()
    {
        dirty_ = false;
        if (dead_) return;
        for (;;)
        {
            if (sent_ == out_.size())
            {
                out_.clear();
                sent_ = 0;
                while (out_.size() < (1 << 16))
                {
                    const uint8_t* data = nullptr;
                    ssize_t n = nghttp2_session_mem_send(session_, &data);
                    if (n < 0) return die();
                    if (n == 0) break;
                    out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
                }
                if (out_.empty()) break;
            }
            ssize_t n = writeSome(out_.data() + sent_, out_.size() - sent_);
            if (n < 0) return die();
            if (n == 0) break;  // the socket is full: EPOLLOUT tells when it drains
            sent_ += static_cast<size_t>(n);
            lastSent_ = Clock::now();
        }
        bool blocked = sent_ < out_.size();
        if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_) && !blocked)
            return die();
        // A peer that does not read its answers is not read from either: what it can make us hold stays
        // bounded by its streams (nghttp2 keeps the answers of calls not yet sent, not us).
        uint32_t events =
            (blocked ? uint32_t(EPOLLOUT) : 0u) | (blocked && pauseWhenBlocked() ? 0u : uint32_t(EPOLLIN));
        if (events != events_)
        {
            events_ = events;
            watch(EPOLL_CTL_MOD, fd_, events_, this);
        }
    }

    void die()
    {
        if (dead_) return;
        dead_ = true;
        epoll_ctl(gEpoll, EPOLL_CTL_DEL, fd_, nullptr);
        onDeath();
        gDead.push_back(this);
    }
    bool dead() const { return dead_; }
    Clock::time_point lastSent() const { return lastSent_; }

protected:
    virtual void onDeath() = 0;
    virtual bool pauseWhenBlocked() const { return false; }

    void start(uint32_t events)
    {
        events_ = events;
        watch(EPOLL_CTL_ADD, fd_, events_, this);
        markDirty();
    }

    void readSome()
    {
        static char buffer[1 << 16];
        for (int turns = 0; turns < 16; ++turns)
        {
            ssize_t n;
            if (ssl_)
            {
                int got = SSL_read(ssl_, buffer, sizeof buffer);
                if (got <= 0)
                {
                    int error = SSL_get_error(ssl_, got);
                    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return;
                    ERR_clear_error();
                    return die();
                }
                n = got;
            }
            else
            {
                n = read(fd_, buffer, sizeof buffer);
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) return die();
            }
            ssize_t used = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buffer),
                                                    static_cast<size_t>(n));
            if (used < 0 || dead_) return die();
            if (static_cast<size_t>(n) < sizeof buffer && !ssl_) return;
        }
    }

    // Bytes written, 0 when the socket would block, -1 when the connection is gone.
    ssize_t writeSome(const char* data, size_t size)
    {
        if (ssl_)
        {
            int n = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
            if (n > 0) return n;
            int error = SSL_get_error(ssl_, n);
            if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return 0;
            ERR_clear_error();
            return -1;
        }
        for (;;)
        {
            ssize_t n = send(fd_, data, size, MSG_NOSIGNAL);
            if (n >= 0) return n;
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            return -1;
        }
    }

    int fd_;
    SSL* ssl_;
    nghttp2_session* session_ = nullptr;
    std::string out_;
    size_t sent_ = 0;
    uint32_t events_ = 0;
    bool dirty_ = false, dead_ = false;
    Clock::time_point lastSent_ = Clock::now();
};

class Downstream;
class Upstream;

// One call: a stream on a public connection and, once its request is checked, a stream to tritonserver or to
// the Python front. It ends when both are closed.
struct Call
{
    Downstream* down = nullptr;
    int32_t downId = -1;
    Upstream* up = nullptr;
    int32_t upId = -1;

    std::string method, model, encoding, contentType;
    std::string adminKey;  // the last admin-key metadata value, when printable
    bool hasAdminKey = false;
    size_t metadataBytes = 0;
    bool haveDeadline = false;
    Clock::time_point deadline;    // the client's (grpc-timeout)
    Clock::time_point upstreamBy;  // tritonserver's answer is due (upstream_timeout_ms after it was sent)
    std::multimap<Clock::time_point, Call*>::iterator timer;
    bool timed = false;

    std::string in;       // the request's bytes as received, prefix included
    size_t expected = 0;  // prefix + length, once the prefix is in
    bool refusedEarly = false, requestEnded = false, answered = false, overflow = false;
    bool counted = false;
    bool sending = false;  // its answer is submitted on its connection, which has not closed the stream

    std::string upstreamBody;  // framed, re-encoded request
    size_t upstreamSent = 0;
    std::string response;  // the framed answer, as tritonserver or the Python front sent it
    size_t responseSent = 0;
    int httpStatus = 0;
    bool haveGrpcStatus = false;
    int grpcStatus = 0;
    std::string grpcMessage;

    void maybeDelete();
};

std::multimap<Clock::time_point, Call*> gTimers;

void cancelTimer(Call* call)
{
    if (call->timed)
    {
        gTimers.erase(call->timer);
        call->timed = false;
    }
}
void setTimer(Call* call, Clock::time_point when)
{
    cancelTimer(call);
    call->timer = gTimers.emplace(when, call);
    call->timed = true;
}

void Call::maybeDelete()
{
    if (down == nullptr && up == nullptr)
    {
        if (counted) --gInFlight;
        cancelTimer(this);
        delete this;
    }
}

// A header field of a HEADERS frame as views, and the call of its stream (nullptr: none, or another frame).
Call* headerField(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                  size_t nameLength, const uint8_t* value, size_t valueLength, std::string_view& key,
                  std::string_view& text)
{
    if (frame->hd.type != NGHTTP2_HEADERS) return nullptr;
    key = std::string_view(reinterpret_cast<const char*>(name), nameLength);
    text = std::string_view(reinterpret_cast<const char*>(value), valueLength);
    return static_cast<Call*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
}

nghttp2_nv header(std::string_view name, std::string_view value)
{
    return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
            reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
            NGHTTP2_NV_FLAG_NONE};
}

// ---------------------------------------------------------------------------------------------- upstream

// A client session to tritonserver's private gRPC socket, or to the Python front's. Dialled when a call needs
// it; a connection that ends or is told to go away fails its calls UNAVAILABLE and the next call dials again.
class Upstream : public Connection
{
public:
    static Upstream* dial(const std::string& address);
    void submit(Call* call);
    void detach(Call* call, bool cancel);

private:
    Upstream(int fd) : Connection(fd, nullptr) {}
    void onDeath() override;
    void setup();
    void ended(Call* call, uint32_t errorCode);
    static ssize_t readBody(nghttp2_session*, int32_t, uint8_t*, size_t, uint32_t*, nghttp2_data_source*,
                            void*);

    std::set<Call*> calls_;

public:  // nghttp2's callbacks (makeCallbacks)
    static int onHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t*, size_t, const uint8_t*,
                        size_t, uint8_t, void*);
    static int onData(nghttp2_session*, uint8_t, int32_t, const uint8_t*, size_t, void*);
    static int onClose(nghttp2_session*, int32_t, uint32_t, void*);
};

Upstream* gTriton = nullptr;
Upstream* gPython = nullptr;

// ---------------------------------------------------------------------------------------------- downstream

class Downstream : public Connection
{
public:
    Downstream(int fd, SSL* ssl);
    void answer(Call* call);  // upstream's answer, as the call's fields hold it
    void refuse(Call* call, Code code, const std::string& message);
    void detach(Call* call);

private:
    void onDeath() override;
    bool pauseWhenBlocked() const override { return true; }
    void awaitSending(Call* call);
    void requestDone(Call* call);
    void dispatch(Call* call);
    void infer(Call* call);
    void relay(Call* call);
    static ssize_t readResponse(nghttp2_session*, int32_t, uint8_t*, size_t, uint32_t*, nghttp2_data_source*,
                                void*);

    std::set<Call*> calls_;

public:  // nghttp2's callbacks (makeCallbacks)
    static int onBeginHeaders(nghttp2_session*, const nghttp2_frame*, void*);
    static int onHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t*, size_t, const uint8_t*,
                        size_t, uint8_t, void*);
    static int onInvalidHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t*, size_t, const uint8_t*,
                               size_t, uint8_t, void*)
    {
        return 0;  // dropped, not forwarded: a line break in a key is a wrong key
    }
    static int onData(nghttp2_session*, uint8_t, int32_t, const uint8_t*, size_t, void*);
    static int onFrame(nghttp2_session*, const nghttp2_frame*, void*);
    static int onFrameSent(nghttp2_session*, const nghttp2_frame*, void*);
    static int onClose(nghttp2_session*, int32_t, uint32_t, void*);

    Clock::time_point born = Clock::now();
    bool heard = false;  // a frame arrived: the preface (and TLS handshake) are done
    int waiting = 0;     // answers submitted whose streams have not closed (not yet sent, or not yet read)
    Clock::time_point waitingSince;  // when the last of them was sent or `waiting` became non-zero
};

// The public connections, for the sweep that closes those silent past the header timeout.
std::set<Downstream*> gDownstreams;

nghttp2_session_callbacks* gServerCallbacks = nullptr;
nghttp2_session_callbacks* gClientCallbacks = nullptr;
nghttp2_option* gServerOptions = nullptr;

Downstream::Downstream(int fd, SSL* ssl) : Connection(fd, ssl)
{
    nghttp2_session_server_new2(&session_, gServerCallbacks, this, gServerOptions);
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
         static_cast<uint32_t>(gConfig.L("max_grpc_streams_per_connection"))},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(gConfig.L("max_grpc_metadata_bytes"))},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 3);
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 1 << 24);
    gDownstreams.insert(this);
    start(EPOLLIN);
}

// Once a second: a connection that has not finished its TLS handshake and HTTP/2 preface within the header
// timeout is closed (a client that connects and says nothing holds no descriptor for long), and so is one
// whose answers have not moved for the body timeout (a client that reads nothing, or opens no flow-control
// window, would otherwise keep its calls counted against the calls in flight for good).
void sweep()
{
    auto now = Clock::now();
    auto silentBefore = now - std::chrono::milliseconds(gConfig.L("header_timeout_ms"));
    auto stuckBefore = now - std::chrono::milliseconds(gConfig.L("body_timeout_ms"));
    for (Downstream* down : std::vector<Downstream*>(gDownstreams.begin(), gDownstreams.end()))
    {
        if (!down->heard && down->born < silentBefore)
            down->die();
        else if (down->waiting > 0 && std::max(down->lastSent(), down->waitingSince) < stuckBefore)
            down->die();
    }
}

int Downstream::onBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* self)
{
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    auto* down = static_cast<Downstream*>(self);
    auto* call = new Call();
    call->down = down;
    call->downId = frame->hd.stream_id;
    down->calls_.insert(call);
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, call);
    // The body timeout (the HTTP front's): the whole request is in by then, or the call is refused.
    setTimer(call, Clock::now() + std::chrono::milliseconds(gConfig.L("body_timeout_ms")));
    return 0;
}

int Downstream::onHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                         size_t nameLength, const uint8_t* value, size_t valueLength, uint8_t, void*)
{
    std::string_view key, text;
    Call* call = headerField(session, frame, name, nameLength, value, valueLength, key, text);
    if (call == nullptr) return 0;
    call->metadataBytes += nameLength + valueLength + 32;  // HTTP/2's measure of a header list
    if (call->metadataBytes > static_cast<size_t>(gConfig.L("max_grpc_metadata_bytes")))
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
            if (!call->timed || call->deadline < call->timer->first) setTimer(call, call->deadline);
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
    size_t limit = static_cast<size_t>(gConfig.L("max_grpc_message_bytes"));
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
        // Grown as the bytes come, not reserved as declared: a client that declares and sends nothing
        // holds nothing.
        call->in.reserve(std::min<size_t>(call->expected, 1 << 20));
    }
    if (call->expected != 0 && before + length > call->expected)
    {
        call->overflow = true;  // a second message in a unary call
        return 0;
    }
    call->in.append(reinterpret_cast<const char*>(data), length);
    return 0;
}

int Downstream::onFrame(nghttp2_session* session, const nghttp2_frame* frame, void* self)
{
    static_cast<Downstream*>(self)->heard = true;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
    {
        auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
        size_t limit = static_cast<size_t>(gConfig.L("max_grpc_metadata_bytes"));
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
    if (call->sending)
    {
        call->sending = false;
        --waiting;
        waitingSince = Clock::now();  // an answer went: the others get the whole timeout again
    }
    nghttp2_session_set_stream_user_data(session_, call->downId, nullptr);
    calls_.erase(call);
    call->down = nullptr;
    // A client that leaves (or whose deadline passed) does not cancel tritonserver's call: Triton 2.51 dies
    // of calls cancelled on a connection that multiplexes many (SIGSEGV within seconds of calls with
    // millisecond deadlines, measured here; the same clients connected directly did not crash it). The call
    // runs to its end, its answer is dropped, and it counts against the calls in flight until then.
    call->maybeDelete();
}

void Downstream::onDeath()
{
    gDownstreams.erase(this);
    for (Call* call : std::vector<Call*>(calls_.begin(), calls_.end())) detach(call);
}

void Downstream::requestDone(Call* call)
{
    call->requestEnded = true;
    if (call->refusedEarly || call->answered) return;
    dispatch(call);
}

void Downstream::dispatch(Call* call)
{
    if (gInFlight >= gConfig.L("max_grpc_concurrent_rpcs"))
        return refuse(call, Code::RESOURCE_EXHAUSTED, gConfig.concurrentRefusal);
    ++gInFlight;
    call->counted = true;
    if (call->contentType.compare(0, 16, "application/grpc") != 0)
        return refuse(call, Code::UNIMPLEMENTED, "Method not found!");
    if (call->method != "ModelInfer" && !gConfig.relayed.count(call->method))
        return refuse(call, Code::UNIMPLEMENTED, "Method not found!");
    if (call->overflow || call->expected == 0 || call->in.size() != call->expected)
        return refuse(call, Code::INVALID_ARGUMENT, "malformed request");
    bool compressed = call->in[0] != 0;
    if (compressed)
    {
        if (call->encoding != "gzip" && call->encoding != "deflate")
            return refuse(call, Code::UNIMPLEMENTED,
                          "Compression algorithm '" + call->encoding + "' is not supported");
        std::string inflated;
        try
        {
            if (!inflateMessage(std::string_view(call->in).substr(kPrefix), call->encoding,
                                static_cast<size_t>(gConfig.L("max_grpc_message_bytes")), inflated))
                return refuse(call, Code::INTERNAL, "the compressed message is damaged");
        }
        catch (const Refused& refused)
        {
            return refuse(call, refused.code, refused.message);
        }
        call->in = framed(inflated);
    }
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
    cancelTimer(call);
    std::string status = std::to_string(static_cast<int>(code)), text = percentEncode(message);
    nghttp2_nv headers[] = {header(":status", "200"), header("content-type", "application/grpc"),
                            header("grpc-status", status), header("grpc-message", text)};
    nghttp2_submit_response(session_, call->downId, headers, 4, nullptr);
    awaitSending(call);
}

void Downstream::awaitSending(Call* call)
{
    call->sending = true;
    if (waiting++ == 0) waitingSince = Clock::now();
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
    }
    return static_cast<ssize_t>(n);
}

void Downstream::answer(Call* call)
{
    if (call->answered) return;
    Code code = call->haveGrpcStatus ? static_cast<Code>(call->grpcStatus) : Code::UNKNOWN;
    std::string message = call->grpcMessage;
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
    cancelTimer(call);
    nghttp2_nv headers[] = {header(":status", "200"), header("content-type", "application/grpc")};
    nghttp2_data_provider body;
    body.source.ptr = call;
    body.read_callback = readResponse;
    nghttp2_submit_response(session_, call->downId, headers, 2, &body);
    awaitSending(call);
}

// ---------------------------------------------------------------------------------------------- dialling

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
    call->upstreamBy = Clock::now() + std::chrono::milliseconds(gConfig.L("upstream_timeout_ms"));
    setTimer(call, call->haveDeadline ? std::min(call->upstreamBy, call->deadline) : call->upstreamBy);
    std::string path = gMethodPrefix + call->method,
                timeout = std::to_string(gConfig.L("upstream_timeout_ms")) + "m";
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
    markDirty();
}

ssize_t Upstream::readBody(nghttp2_session*, int32_t, uint8_t* buffer, size_t length, uint32_t* flags,
                           nghttp2_data_source* source, void*)
{
    auto* call = static_cast<Call*>(source->ptr);
    size_t n = std::min(length, call->upstreamBody.size() - call->upstreamSent);
    std::memcpy(buffer, call->upstreamBody.data() + call->upstreamSent, n);
    call->upstreamSent += n;
    if (call->upstreamSent == call->upstreamBody.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
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
    if (call != nullptr) call->response.append(reinterpret_cast<const char*>(data), length);
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
}

void Upstream::onDeath()
{
    if (gTriton == this) gTriton = nullptr;
    if (gPython == this) gPython = nullptr;
    for (Call* call : std::vector<Call*>(calls_.begin(), calls_.end())) ended(call, NGHTTP2_NO_ERROR);
}

// ---------------------------------------------------------------------------------------------- the listener

SSL_CTX* gTls = nullptr;

int selectH2(SSL*, const unsigned char** out, unsigned char* outLength, const unsigned char* in,
             unsigned int inLength, void*)
{
    if (nghttp2_select_next_protocol(const_cast<unsigned char**>(out), outLength, in, inLength) != 1)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    return SSL_TLSEXT_ERR_OK;
}

SSL_CTX* tlsContext()
{
    SSL_CTX* context = SSL_CTX_new(TLS_server_method());
    if (context == nullptr) throw std::runtime_error("TLS: no context");
    SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
    SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (SSL_CTX_use_certificate_chain_file(context, gConfig.tlsCert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(context, gConfig.tlsKey.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(context) != 1)
        throw std::runtime_error("TLS: the certificate or key cannot be used");
    if (gConfig.tlsMutual)
    {
        if (gConfig.tlsRoot.empty() ||
            SSL_CTX_load_verify_locations(context, gConfig.tlsRoot.c_str(), nullptr) != 1)
            throw std::runtime_error("TLS: the root certificates cannot be read");
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    SSL_CTX_set_alpn_select_cb(context, selectH2, nullptr);
    return context;
}

class Listener : public Watched
{
public:
    explicit Listener(int fd) : fd_(fd) { watch(EPOLL_CTL_ADD, fd_, EPOLLIN, this); }
    void onEvents(uint32_t) override
    {
        for (int turns = 0; turns < 64; ++turns)
        {
            int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) return;  // EAGAIN, or out of descriptors for now (the next event tries again)
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            SSL* ssl = nullptr;
            if (gTls != nullptr)
            {
                ssl = SSL_new(gTls);
                SSL_set_fd(ssl, fd);
                SSL_set_accept_state(ssl);
            }
            new Downstream(fd, ssl);
        }
    }
    void stop()
    {
        epoll_ctl(gEpoll, EPOLL_CTL_DEL, fd_, nullptr);
        close(fd_);
    }

private:
    int fd_;
};

// "HOST:PORT" or "[V6]:PORT"; the bound port.
int listenOn(const std::string& address, int& port)
{
    size_t colon = address.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("no port in " + address);
    std::string host = address.substr(0, colon), service = address.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0 || !found)
        throw std::runtime_error("the address is not local");
    int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bool bound = fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, 1024) == 0;
    freeaddrinfo(found);
    if (!bound)
    {
        if (fd >= 0) close(fd);
        throw std::runtime_error("the port is taken or the address is not local");
    }
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
    port = ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
    return fd;
}

void makeCallbacks()
{
    nghttp2_session_callbacks_new(&gServerCallbacks);
    nghttp2_session_callbacks_set_on_begin_headers_callback(gServerCallbacks, Downstream::onBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(gServerCallbacks, Downstream::onHeader);
    nghttp2_session_callbacks_set_on_invalid_header_callback(gServerCallbacks, Downstream::onInvalidHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(gServerCallbacks, Downstream::onData);
    nghttp2_session_callbacks_set_on_frame_recv_callback(gServerCallbacks, Downstream::onFrame);
    nghttp2_session_callbacks_set_on_frame_send_callback(gServerCallbacks, Downstream::onFrameSent);
    nghttp2_session_callbacks_set_on_stream_close_callback(gServerCallbacks, Downstream::onClose);
    nghttp2_option_new(&gServerOptions);
    nghttp2_option_set_max_send_header_block_length(gServerOptions, 1 << 16);

    nghttp2_session_callbacks_new(&gClientCallbacks);
    nghttp2_session_callbacks_set_on_header_callback(gClientCallbacks, Upstream::onHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(gClientCallbacks, Upstream::onData);
    nghttp2_session_callbacks_set_on_stream_close_callback(gClientCallbacks, Upstream::onClose);
}

Listener* gListener = nullptr;
int gWake = -1;  // an eventfd: stopServing() wakes the loop with it

// At the end: every connection closed and its calls ended, so that nothing is left to the process's exit.
void closeAll()
{
    for (Downstream* down : std::vector<Downstream*>(gDownstreams.begin(), gDownstreams.end())) down->die();
    if (gTriton != nullptr) gTriton->die();
    if (gPython != nullptr) gPython->die();
    for (Connection* connection : gDead) delete connection;
    gDead.clear();
    gDirty.clear();
    delete gListener;  // stopped (its socket closed) when the stop began
    gListener = nullptr;
}

// Expired deadlines: the call is cancelled upstream and answered DEADLINE_EXCEEDED.
int expire()
{
    Clock::time_point now = Clock::now();
    while (!gTimers.empty() && gTimers.begin()->first <= now)
    {
        Call* call = gTimers.begin()->second;
        cancelTimer(call);
        bool clientDeadline = call->haveDeadline && call->deadline <= now;
        if (call->up != nullptr && call->upstreamBy > now)
        {
            // The client's deadline: it is answered; tritonserver's call goes on until it ends or is due.
            if (call->down != nullptr) call->down->refuse(call, Code::DEADLINE_EXCEEDED, "Deadline Exceeded");
            setTimer(call, call->upstreamBy);
            continue;
        }
        if (call->up != nullptr)  // tritonserver did not answer in time: the Python edge probes the model
        {
            call->up->detach(call, true);
            if (call->method == "ModelInfer") say("fail " + call->model);
        }
        if (call->down != nullptr && !call->requestEnded && !clientDeadline)
            call->down->refuse(call, Code::DEADLINE_EXCEEDED,
                               "the request did not arrive within " +
                                   std::to_string(gConfig.L("body_timeout_ms") / 1000) + " s");
        else if (call->down != nullptr)
            call->down->refuse(call, Code::DEADLINE_EXCEEDED, "Deadline Exceeded");
        call->maybeDelete();
    }
    if (gTimers.empty()) return 1000;
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(gTimers.begin()->first - now).count();
    return static_cast<int>(std::clamp<int64_t>(wait + 1, 1, 1000));
}

}  // namespace

void serve()
{
    Listener* listener = gListener;
    int wake = gWake;
    epoll_event events[256];
    Clock::time_point stopBy{}, sweepAt = Clock::now();
    for (;;)
    {
        int timeout = expire();
        if (Clock::now() >= sweepAt)
        {
            sweep();
            sweepAt = Clock::now() + std::chrono::seconds(1);
        }
        for (size_t i = 0; i < gDirty.size(); ++i) gDirty[i]->flush();  // a flush can mark others dirty
        gDirty.clear();
        for (Connection* connection : gDead) delete connection;
        gDead.clear();
        if (gStopping.load())
        {
            if (stopBy == Clock::time_point{})
            {
                listener->stop();
                stopBy = Clock::now() + std::chrono::seconds(1);
            }
            if (gInFlight == 0 || Clock::now() >= stopBy) return closeAll();
            timeout = std::min(timeout, 50);
        }
        int n = epoll_wait(gEpoll, events, 256, timeout);
        for (int i = 0; i < n; ++i)
        {
            if (events[i].data.ptr == nullptr)
            {
                uint64_t ignored;
                ssize_t got = read(wake, &ignored, sizeof ignored);
                (void)got;
                continue;
            }
            static_cast<Watched*>(events[i].data.ptr)->onEvents(events[i].events);
        }
    }
}

void openPublicPort(int& port)
{
    gMethodPrefix = "/" + gConfig.service + "/";
    if (gConfig.tls) gTls = tlsContext();
    makeCallbacks();
    gEpoll = epoll_create1(EPOLL_CLOEXEC);
    gWake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (gEpoll < 0 || gWake < 0) throw std::runtime_error("no epoll or eventfd");
    watch(EPOLL_CTL_ADD, gWake, EPOLLIN, nullptr);
    gListener = new Listener(listenOn(gConfig.listen, port));
}

void stopServing()
{
    gStopping.store(true);
    uint64_t one = 1;
    ssize_t woken = write(gWake, &one, sizeof one);
    (void)woken;
}

}  // namespace edge
