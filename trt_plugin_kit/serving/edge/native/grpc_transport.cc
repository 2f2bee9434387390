// The transport of the edge's compiled gRPC front: one thread, one epoll set for the public port, its
// connections and the connections to tritonserver's and the Python front's private Unix sockets (see
// grpc_edge.cc for the whole). Here: the loop, the listener with its connection caps, the budgets' books and
// the deadlines; the connections' parts are in connection.cc, downstream.cc and upstream.cc.
#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "transport.h"

namespace edge
{

// ---------------------------------------------------------------------------------------------- the loop

// One thread, one epoll set: the public connections (HTTP/2 server sessions, nghttp2) and the connections to
// tritonserver and to the Python front (client sessions). Every hand-off between threads costs more CPU than
// the checks themselves. The gRPC C++ front this replaced (one completion-queue thread) took 109-120 us per
// l2norm call, two thirds of it gRPC core; this loop 54-56 us, measured side by side (docs/SECURITY.md).
int gEpoll = -1;
std::string gMethodPrefix;
int64_t gInFlight = 0;
Limits gLimits;

void watch(int op, int fd, uint32_t events, Watched* who)
{
    epoll_event event{};
    event.events = events;
    event.data.ptr = who;
    epoll_ctl(gEpoll, op, fd, &event);
}

namespace
{
std::atomic<bool> gStopping{false};
}  // namespace

// ---------------------------------------------------------------------------------------------- peers

namespace
{
std::unordered_map<std::string, Peer> gPeers;

// The peer's address as its key: IPv4 whole, IPv6 by its /64 (what one host is usually given).
std::string peerKey(const sockaddr_storage& address)
{
    if (address.ss_family == AF_INET)
    {
        const auto& in = reinterpret_cast<const sockaddr_in&>(address).sin_addr;
        return std::string(reinterpret_cast<const char*>(&in), 4);
    }
    if (address.ss_family == AF_INET6)
    {
        const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&in6)) return std::string(reinterpret_cast<const char*>(&in6) + 12, 4);
        return std::string(reinterpret_cast<const char*>(&in6), 8);
    }
    return "unix";
}
}  // namespace

Peer* peerOf(const std::string& address)
{
    Peer& peer = gPeers[address];
    peer.address = address;
    return &peer;
}

void releasePeer(Peer* peer)
{
    if (peer->connections == 0 && peer->calls == 0 && peer->bytes == 0) gPeers.erase(peer->address);
}

// glibc keeps freed memory for reuse unless told: after a burst past 64 MiB held for clients, once less than
// 8 MiB is, it is given back (malloc_trim; big buffers are mmapped and go back when freed, see
// openPublicPort).
void returnMemoryIfIdle()
{
    static bool burst = false;
    if (gBufferedBytes > (64 << 20))
        burst = true;
    else if (burst && gBufferedBytes < (8 << 20))
    {
        burst = false;
        malloc_trim(0);
    }
}

// ---------------------------------------------------------------------------------------------- the listener

namespace
{

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

int gSpareFd = -1;  // held so that, out of descriptors, one can be freed to accept and close a connection

// Accepts what the backlog holds; past the connection caps (the front's, the peer's) a connection is
// accepted and closed at once (reset, so no TIME_WAIT is left here): never left in the backlog, where it
// would wake the loop again and again.
class Listener : public Watched
{
public:
    explicit Listener(int fd) : fd_(fd) { watch(EPOLL_CTL_ADD, fd_, EPOLLIN, this); }
    void onEvents(uint32_t) override
    {
        for (int turns = 0; turns < 64; ++turns)
        {
            sockaddr_storage address{};
            socklen_t length = sizeof address;
            int fd =
                accept4(fd_, reinterpret_cast<sockaddr*>(&address), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0 && (errno == EMFILE || errno == ENFILE) && gSpareFd >= 0)
            {
                close(gSpareFd);
                fd = accept(fd_, nullptr, nullptr);
                if (fd >= 0) shut(fd);
                gSpareFd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                continue;
            }
            if (fd < 0) return;  // EAGAIN
            Peer* peer = peerOf(peerKey(address));
            if (static_cast<int64_t>(gDownstreams.size()) >= gLimits.maxConnections ||
                peer->connections >= gLimits.maxConnectionsPerPeer)
            {
                shut(fd);
                releasePeer(peer);
                continue;
            }
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            SSL* ssl = nullptr;
            if (gTls != nullptr)
            {
                ssl = SSL_new(gTls);
                SSL_set_fd(ssl, fd);
                SSL_set_accept_state(ssl);
            }
            new Downstream(fd, ssl, peer);
        }
    }
    void stop()
    {
        epoll_ctl(gEpoll, EPOLL_CTL_DEL, fd_, nullptr);
        close(fd_);
    }

private:
    static void shut(int fd)
    {
        linger reset{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        close(fd);
    }
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
    stopInflater();
}

// ---------------------------------------------------------------------------------------------- deadlines

void expireCall(Call* call, Clock::time_point now)
{
    if (call->down != nullptr && call->sending && call->answerBy <= now) call->down->abandon(call);
    if (call->down != nullptr && !call->answered)
    {
        // The client's deadline first (its words), then the request's own (the body timeout).
        if (call->haveDeadline && call->deadline <= now)
            call->down->refuse(call, Code::DEADLINE_EXCEEDED, "Deadline Exceeded");
        else if (!call->requestEnded && call->requestBy <= now)
            call->down->refuse(
                call, Code::DEADLINE_EXCEEDED,
                "the request did not arrive within " + std::to_string(gLimits.requestMs / 1000) + " s");
    }
    if (call->up != nullptr && call->upstreamBy <= now)
    {
        // tritonserver did not answer in time: the call is cancelled there and the Python edge probes the
        // model. (A client's deadline alone never cancels tritonserver's call: Downstream::detach.)
        call->up->detach(call, true);
        if (call->method == "ModelInfer") say("fail " + call->model);
        if (call->down != nullptr) call->down->refuse(call, Code::DEADLINE_EXCEEDED, "Deadline Exceeded");
    }
    rearm(call);
    call->maybeDelete();
}

// Expired deadlines; the milliseconds until the next one (at most 1000).
int expire()
{
    Clock::time_point now = Clock::now();
    while (!gTimers.empty() && gTimers.begin()->first <= now)
    {
        Call* call = gTimers.begin()->second;
        cancelTimer(call);
        expireCall(call, now);
    }
    if (gTimers.empty()) return 1000;
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(gTimers.begin()->first - now).count();
    return static_cast<int>(std::clamp<int64_t>(wait + 1, 1, 1000));
}

// Once a second: the connections' own time budgets (Downstream::overdue).
void sweep()
{
    auto now = Clock::now();
    for (Downstream* down : std::vector<Downstream*>(gDownstreams.begin(), gDownstreams.end()))
        down->overdue(now);
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
        returnMemoryIfIdle();
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

namespace
{

// The limits the loop reads, once; the connection cap kept below the descriptors this process may open.
void readLimits()
{
    rlimit files{};
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    getrlimit(RLIMIT_NOFILE, &files);
    // Kept for the process's own: stdin/out/err, epoll, eventfds, the two upstream sockets, the spare.
    const int64_t reserved = 32;
    gLimits = Limits{
        gConfig.L("max_grpc_message_bytes"),
        gConfig.L("max_grpc_metadata_bytes"),
        gConfig.L("body_timeout_ms"),
        gConfig.L("answer_timeout_ms"),
        gConfig.L("upstream_timeout_ms"),
        gConfig.L("handshake_timeout_ms"),
        gConfig.L("idle_timeout_ms"),
        gConfig.L("max_grpc_concurrent_rpcs"),
        gConfig.L("max_grpc_concurrent_rpcs_per_peer"),
        std::min<int64_t>(gConfig.L("max_grpc_connections"), static_cast<int64_t>(files.rlim_cur) - reserved),
        gConfig.L("max_grpc_connections_per_peer"),
        gConfig.L("grpc_buffer_bytes"),
        gConfig.L("grpc_buffer_bytes_per_connection"),
        gConfig.L("grpc_buffer_bytes_per_peer"),
        gConfig.L("grpc_inflate_pending")};
}

}  // namespace

void openPublicPort(int& port)
{
    readLimits();
    // Buffers of 256 KiB and more are mmapped, so that they go back to the system when freed (glibc's
    // threshold otherwise grows to the largest buffer freed, and a burst of 32 MiB messages stays). Fixing it
    // fixes the heap's trim threshold at 128 KiB, which would give the heap's top back and take it again
    // call after call: 64 MiB instead, and malloc_trim after a burst (returnMemoryIfIdle).
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    gMethodPrefix = "/" + gConfig.service + "/";
    if (gConfig.tls) gTls = tlsContext();
    makeCallbacks();
    gEpoll = epoll_create1(EPOLL_CLOEXEC);
    gWake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    gSpareFd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (gEpoll < 0 || gWake < 0) throw std::runtime_error("no epoll or eventfd");
    watch(EPOLL_CTL_ADD, gWake, EPOLLIN, nullptr);
    gListener = new Listener(listenOn(gConfig.listen, port));
    startInflater();
}

void stopServing()
{
    gStopping.store(true);
    uint64_t one = 1;
    ssize_t woken = write(gWake, &one, sizeof one);
    (void)woken;
}

}  // namespace edge
