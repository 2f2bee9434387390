// The transport's parts (grpc_transport.cc: the loop, listener and budgets; connection.cc: HTTP/2 over a
// socket; downstream.cc: the public connections; upstream.cc: tritonserver's and the Python front's;
// framing.cc: gRPC's own layer), which all run on the loop's one thread except the inflater's worker.
#pragma once

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "edge.h"

namespace edge
{

using Clock = std::chrono::steady_clock;
constexpr size_t kPrefix = 5;  // a gRPC message's prefix: compressed flag, 4-byte big-endian length

// ---------------------------------------------------------------------------------------------- framing.cc

std::string framed(std::string_view message);
std::string percentEncode(std::string_view text);
std::string percentDecode(std::string_view text);
// grpc-timeout: up to 8 digits and a unit; false when malformed. Capped at 10^9 s.
bool parseTimeout(std::string_view value, Clock::duration& timeout);
// A gzip or deflate message, inflated to at most `limit` bytes; false when damaged; Refused past the limit.
bool inflateMessage(std::string_view in, const std::string& encoding, size_t limit, std::string& out);

// ---------------------------------------------------------------------------------------------- the loop

struct Watched
{
    virtual void onEvents(uint32_t events) = 0;
    virtual ~Watched() = default;
};

extern int gEpoll;
extern std::string gMethodPrefix;  // "/SERVICE/"
extern int64_t gInFlight;          // calls counted against max_grpc_concurrent_rpcs
void watch(int op, int fd, uint32_t events, Watched* who);

// The limits the loop reads on every call, read once from gConfig (whose L() is a map lookup).
struct Limits
{
    int64_t maxMessage, maxMetadata, requestMs, answerMs, upstreamMs, handshakeMs, idleMs;
    int64_t maxCalls, maxCallsPerPeer, maxConnections, maxConnectionsPerPeer;
    int64_t bufferTotal, bufferPerConnection, bufferPerPeer, inflatePending;
};
extern Limits gLimits;

// ---------------------------------------------------------------------------------------------- budgets

// What one peer address holds: connections, calls in flight, bytes buffered for it.
class Downstream;
struct Call;
struct Peer
{
    std::string address;
    int64_t connections = 0, calls = 0, bytes = 0;
};
Peer* peerOf(const std::string& address);  // created on first use
void releasePeer(Peer* peer);              // forgotten once it holds nothing

// Bytes held for clients (requests being received or inflated, answers not yet sent), by the whole front,
// the connection and the peer; each call's share is its buffers' capacity (account() after they change).
extern int64_t gBufferedBytes;
// Whether `more` bytes for this call fit the three budgets (the front's, its connection's, its peer's).
bool fits(const Call* call, int64_t more);
void account(Call* call);
// After a burst, freed memory goes back to the system (glibc keeps what it freed otherwise).
void returnMemoryIfIdle();

// ---------------------------------------------------------------------------------------------- connections

class Connection;
extern std::vector<Connection*> gDirty, gDead;

// An HTTP/2 connection over a socket (TLS when ssl is given): reads feed nghttp2, what nghttp2 has to send is
// written once per loop turn (flush), so that the frames of many calls share a write.
class Connection : public Watched
{
public:
    Connection(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
    ~Connection() override;
    void onEvents(uint32_t events) override;
    void markDirty();
    void flush();  // send what nghttp2 has, as far as the socket takes it
    void die();
    bool dead() const { return dead_; }
    // Since when what we have to send has not fitted in the socket (time_point{}: it has).
    Clock::time_point blockedSince() const { return blockedSince_; }

protected:
    virtual void onDeath() = 0;
    virtual bool pauseWhenBlocked() const { return false; }
    void start(uint32_t events);
    void readSome();
    ssize_t writeSome(const char* data, size_t size);  // bytes written, 0: would block, -1: gone

    int fd_;
    SSL* ssl_;
    nghttp2_session* session_ = nullptr;
    std::string out_;
    size_t sent_ = 0;
    uint32_t events_ = 0;
    bool dirty_ = false, dead_ = false;
    Clock::time_point blockedSince_{};
};

class Upstream;

// One call: a stream on a public connection and, once its request is checked, a stream to tritonserver or to
// the Python front. It ends when both are closed.
struct Call
{
    Downstream* down = nullptr;
    int32_t downId = -1;
    Upstream* up = nullptr;
    int32_t upId = -1;
    uint64_t serial = 0;  // its key in gCalls (the inflater's answers find it by this)

    std::string method, model, encoding, contentType;
    std::string adminKey;  // the last admin-key metadata value, when printable
    bool hasAdminKey = false;
    size_t metadataBytes = 0;
    // Deadlines: the request's (body timeout), the client's (grpc-timeout), tritonserver's answer
    // (upstream_timeout_ms after it was sent) and the client's reading of our answer (answer timeout).
    Clock::time_point requestBy, deadline, upstreamBy, answerBy;
    bool haveDeadline = false;
    std::multimap<Clock::time_point, Call*>::iterator timer;
    bool timed = false;

    std::string in;       // the request's bytes as received, prefix included
    size_t expected = 0;  // prefix + length, once the prefix is in
    bool refusedEarly = false, requestEnded = false, answered = false, overflow = false;
    bool counted = false;        // against the calls in flight (its front's and its peer's)
    bool sending = false;        // its answer is submitted on its connection, which has not closed the stream
    bool inflating = false;      // its message is with the inflater
    bool answerDropped = false;  // its answer was past the byte budget: refused when upstream ends
    Peer* peer = nullptr;
    int64_t held = 0;  // bytes of in, upstreamBody and response (their capacity), as last accounted

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

extern std::unordered_map<uint64_t, Call*> gCalls;
extern std::multimap<Clock::time_point, Call*> gTimers;
Call* newCall();
// The timer at the earliest deadline the call still has (none: no timer).
void rearm(Call* call);
void cancelTimer(Call* call);

// A header field of a HEADERS frame as views, and the call of its stream (nullptr: none, or another frame).
Call* headerField(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                  size_t nameLength, const uint8_t* value, size_t valueLength, std::string_view& key,
                  std::string_view& text);
nghttp2_nv header(std::string_view name, std::string_view value);

// ---------------------------------------------------------------------------------------------- upstream.cc

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

extern Upstream* gTriton;
extern Upstream* gPython;

// ----------------------------------------------------------------------------------------------
// downstream.cc

class Downstream : public Connection
{
public:
    Downstream(int fd, SSL* ssl, Peer* peer);
    void answer(Call* call);  // upstream's answer, as the call's fields hold it
    void refuse(Call* call, Code code, const std::string& message);
    void detach(Call* call);
    void abandon(Call* call);  // its answer was not read in time: the stream is reset, its slot freed
    void inflated(Call* call, int status, std::string& message, const std::string& why);  // the inflater's
    // The time budgets no frame renews: handshake (a first request), idle (no call), a socket that takes
    // nothing we send. True when it ended the connection or began to.
    bool overdue(Clock::time_point now);
    int64_t& held() { return held_; }  // bytes its calls hold (account())
    Peer& peer() { return *peer_; }

private:
    void onDeath() override;
    bool pauseWhenBlocked() const override { return true; }
    void awaitSending(Call* call);
    void requestDone(Call* call);
    void dispatch(Call* call);
    void afterInflating(Call* call);
    void infer(Call* call);
    void relay(Call* call);
    static ssize_t readResponse(nghttp2_session*, int32_t, uint8_t*, size_t, uint32_t*, nghttp2_data_source*,
                                void*);

    std::set<Call*> calls_;
    Peer* peer_;
    int64_t held_ = 0;
    Clock::time_point born_ = Clock::now(), lastCall_ = Clock::now(), goingAwaySince_{};
    bool requested_ = false;  // a request's headers arrived: the preface (and TLS handshake) are done

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
};

extern std::set<Downstream*> gDownstreams;
extern nghttp2_session_callbacks* gServerCallbacks;
extern nghttp2_session_callbacks* gClientCallbacks;
extern nghttp2_option* gServerOptions;

// ---------------------------------------------------------------------------------------------- inflater.cc

// Compressed ModelInfer messages are inflated on a worker thread, never on the loop; at most
// gLimits.inflatePending at once (more: refused RESOURCE_EXHAUSTED at once). Results come back through an
// eventfd in the loop's epoll set and find their call by serial (gone: dropped).
bool inflateLater(Call* call, size_t limit);  // false: the inflater is full
void startInflater();
void stopInflater();

}  // namespace edge
