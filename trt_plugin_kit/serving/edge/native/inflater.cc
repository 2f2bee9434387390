// Compressed ModelInfer messages, inflated on a thread of their own: a gzip bomb costs that thread up to
// max_grpc_message_bytes of output (then it is refused), never the loop that answers everyone else. At most
// gLimits.inflatePending messages wait or run at once; more are refused at once.
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "transport.h"

namespace edge
{
namespace
{

struct Job
{
    uint64_t serial;
    std::string compressed;  // the message as received, prefix included
    std::string encoding;
    size_t limit;
    int status = 0;  // 0 inflated, 1 damaged, 2 past the limit
    std::string out, why;
};

std::mutex gLock;
std::condition_variable gWork;
std::deque<Job> gWaiting, gDone;
int64_t gPending = 0;  // waiting, running or done but not yet collected by the loop
bool gStop = false;
std::thread gWorker;
int gDoneFd = -1;

void work()
{
    for (;;)
    {
        Job job;
        {
            std::unique_lock<std::mutex> hold(gLock);
            gWork.wait(hold, [] { return gStop || !gWaiting.empty(); });
            if (gStop) return;
            job = std::move(gWaiting.front());
            gWaiting.pop_front();
        }
        try
        {
            std::string inflated;
            if (inflateMessage(std::string_view(job.compressed).substr(kPrefix), job.encoding, job.limit,
                               inflated))
                job.out = framed(inflated);
            else
                job.status = 1, job.why = "the compressed message is damaged";
        }
        catch (const Refused& refused)
        {
            job.status = 2, job.why = refused.message;
        }
        catch (const std::exception&)
        {
            job.status = 2, job.why = gConfig.busyRefusal;  // out of memory
        }
        std::string().swap(job.compressed);
        {
            std::lock_guard<std::mutex> hold(gLock);
            gDone.push_back(std::move(job));
        }
        uint64_t one = 1;
        ssize_t written = write(gDoneFd, &one, sizeof one);
        (void)written;
    }
}

// The loop's side: the results, each to its call if the call is still there.
struct Collector : Watched
{
    void onEvents(uint32_t) override
    {
        uint64_t ignored;
        ssize_t got = read(gDoneFd, &ignored, sizeof ignored);
        (void)got;
        std::deque<Job> done;
        {
            std::lock_guard<std::mutex> hold(gLock);
            done.swap(gDone);
            gPending -= static_cast<int64_t>(done.size());
        }
        for (Job& job : done)
        {
            auto found = gCalls.find(job.serial);
            if (found == gCalls.end()) continue;
            Call* call = found->second;
            call->inflating = false;
            if (call->down != nullptr) call->down->inflated(call, job.status, job.out, job.why);
            call->maybeDelete();
        }
    }
} gCollector;

}  // namespace

bool inflateLater(Call* call, size_t limit)
{
    {
        std::lock_guard<std::mutex> hold(gLock);
        if (gPending >= gLimits.inflatePending) return false;
        ++gPending;
        Job& job = gWaiting.emplace_back();
        job.serial = call->serial, job.compressed = std::move(call->in), job.encoding = call->encoding;
        job.limit = limit;
    }
    std::string().swap(call->in);
    call->inflating = true;
    gWork.notify_one();
    return true;
}

void startInflater()
{
    gDoneFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (gDoneFd < 0) throw std::runtime_error("no eventfd");
    watch(EPOLL_CTL_ADD, gDoneFd, EPOLLIN, &gCollector);
    gWorker = std::thread(work);
}

void stopInflater()
{
    {
        std::lock_guard<std::mutex> hold(gLock);
        gStop = true;
    }
    gWork.notify_one();
    if (gWorker.joinable()) gWorker.join();
}

}  // namespace edge
