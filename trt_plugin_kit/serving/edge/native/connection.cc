// HTTP/2 over a socket (Connection) and what every call carries: its timer and the bytes it holds.
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "transport.h"

namespace edge
{

std::vector<Connection*> gDirty, gDead;

Connection::~Connection()
{
    if (session_) nghttp2_session_del(session_);
    if (ssl_) SSL_free(ssl_);
    if (fd_ >= 0) close(fd_);
}

void Connection::onEvents(uint32_t events)
{
    if (dead_) return;
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP) || (ssl_ && (events & EPOLLOUT))) readSome();
    if (!dead_) markDirty();
}

void Connection::markDirty()
{
    if (!dirty_ && !dead_)
    {
        dirty_ = true;
        gDirty.push_back(this);
    }
}

void Connection::flush()
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
    }
    bool blocked = sent_ < out_.size();
    if (!blocked)
        blockedSince_ = Clock::time_point{};
    else if (blockedSince_ == Clock::time_point{})
        blockedSince_ = Clock::now();
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

void Connection::die()
{
    if (dead_) return;
    dead_ = true;
    epoll_ctl(gEpoll, EPOLL_CTL_DEL, fd_, nullptr);
    onDeath();
    gDead.push_back(this);
}

void Connection::start(uint32_t events)
{
    events_ = events;
    watch(EPOLL_CTL_ADD, fd_, events_, this);
    markDirty();
}

void Connection::readSome()
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

ssize_t Connection::writeSome(const char* data, size_t size)
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

// ---------------------------------------------------------------------------------------------- calls

std::unordered_map<uint64_t, Call*> gCalls;
std::multimap<Clock::time_point, Call*> gTimers;

Call* newCall()
{
    static uint64_t serial = 0;
    auto* call = new Call();
    call->serial = ++serial;
    gCalls.emplace(call->serial, call);
    return call;
}

void cancelTimer(Call* call)
{
    if (call->timed)
    {
        gTimers.erase(call->timer);
        call->timed = false;
    }
}

void rearm(Call* call)
{
    Clock::time_point next = Clock::time_point::max();
    bool waitingForClient = call->down != nullptr && !call->answered;
    if (waitingForClient && !call->requestEnded) next = std::min(next, call->requestBy);
    if (waitingForClient && call->haveDeadline) next = std::min(next, call->deadline);
    if (call->up != nullptr) next = std::min(next, call->upstreamBy);
    if (call->down != nullptr && call->sending) next = std::min(next, call->answerBy);
    if (call->timed && call->timer->first == next) return;
    cancelTimer(call);
    if (next == Clock::time_point::max()) return;
    call->timer = gTimers.emplace(next, call);
    call->timed = true;
}

void Call::maybeDelete()
{
    if (down != nullptr || up != nullptr || inflating) return;
    if (counted) --gInFlight, --peer->calls;
    cancelTimer(this);
    std::string().swap(in), std::string().swap(upstreamBody), std::string().swap(response);
    account(this);
    releasePeer(peer);
    gCalls.erase(serial);
    delete this;
}

// ---------------------------------------------------------------------------------------------- bytes held

int64_t gBufferedBytes = 0;

bool fits(const Call* call, int64_t more)
{
    if (more <= 0) return true;
    if (gBufferedBytes + more > gLimits.bufferTotal) return false;
    if (call->peer->bytes + more > gLimits.bufferPerPeer) return false;
    return call->down == nullptr || call->down->held() + more <= gLimits.bufferPerConnection;
}

void account(Call* call)
{
    int64_t now =
        static_cast<int64_t>(call->in.capacity() + call->upstreamBody.capacity() + call->response.capacity());
    int64_t delta = now - call->held;
    if (delta == 0) return;
    call->held = now;
    gBufferedBytes += delta;
    call->peer->bytes += delta;
    if (call->down != nullptr) call->down->held() += delta;
}

// ---------------------------------------------------------------------------------------------- headers

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

}  // namespace edge
