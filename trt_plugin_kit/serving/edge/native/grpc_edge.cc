// The edge's public gRPC port, compiled: grpc_front.py's rules for ModelInfer at a cost Python cannot reach.
//
// Started and supervised by the Python edge (edge/native_front.py), which writes everything
// this program knows on its stdin: the limits (edge/limits.py), the names and datatypes the protocol allows
// (edge/tensors.py), the methods served, the sockets, and later the served models' interfaces
// (edge/upstream.py). Nothing here is a copy of those facts; the protocol's field numbers are the only
// constants.
//
// ModelInfer is parsed, checked against the model's interface and re-encoded here, then sent to
// tritonserver's private gRPC socket. Every other allowed method is relayed as received to the Python front
// (GrpcFront) on a private Unix socket, with only the admin-key metadata: the admin rules and readiness keep
// their one home there, and those calls are rare. Methods not in the list: UNIMPLEMENTED here.
//
// The transport is nghttp2 (HTTP/2 framing, HPACK, flow control) on plain sockets, with gRPC's own layer
// written here: the 5-byte message prefix (its length judged before the message is buffered), trailers,
// grpc-timeout, gzip/deflate inflated on a thread of its own (ModelInfer only) up to the message limit. One
// thread and one epoll set serve the public port and the connections to tritonserver and the Python front;
// the frames of all calls ready in one turn share a write. gRPC C++ (1.51) in the same place cost twice the
// CPU per call (records/edge/edge-overhead.md).
//
// Budgets (edge/limits.py; docs/SECURITY.md), none of which a client renews (PINGs and keepalives count for
// nothing): connections per front and per peer, counted at accept (past a cap: accepted and reset); streams
// per connection and header-list size announced in SETTINGS and enforced; calls in flight per front and per
// peer; bytes held for clients (messages, inflated output, answers) per front, connection and peer, refused
// RESOURCE_EXHAUSTED at once past them; a connection that sends no request within the handshake timeout is
// closed, one idle for the idle timeout told GOAWAY; a request not received within the body timeout is
// refused DEADLINE_EXCEEDED; an answer not read within the answer timeout has its stream reset, and a socket
// that takes nothing for as long ends its connection. A client's deadline or departure never cancels
// tritonserver's call (Triton 2.51 dies of that: downstream.cc, Downstream::detach).
//
// ModelInferRequest is parsed by hand (protobuf's wire format) rather than through code generated from
// tritonclient's descriptors: it is the one message this program reads or writes, its tensors stay views of
// the received bytes until they are re-encoded, and no generated Triton code (or its libprotobuf ABI) has to
// be built and kept in step with the Python side's.
//
// stdout: "listening PORT" once the port is bound (or "error WHY" and exit 1), then "fail MODEL" when a
// ModelInfer to tritonserver ends UNAVAILABLE or DEADLINE_EXCEEDED (the Python edge probes the model).
// stdin at EOF (the Python edge is gone): this program stops.

#include <unistd.h>

#include <csignal>
#include <iostream>
#include <thread>

#include "edge.h"

int main()
{
    using namespace edge;
    std::ios::sync_with_stdio(false);
    signal(SIGPIPE, SIG_IGN);  // OpenSSL writes with write(2): a peer gone is an error code, not a signal
    std::vector<std::pair<std::string, std::string>> lines;
    try
    {
        if (!readBlock(std::cin, lines)) throw std::runtime_error("the configuration ended early");
        configure(lines);
        for (const char* key : {"max_request_bytes",
                                "max_grpc_message_bytes",
                                "max_dimension",
                                "max_inputs",
                                "max_outputs",
                                "max_id_length",
                                "max_parameters",
                                "max_shape_dims",
                                "upstream_timeout_ms",
                                "max_grpc_concurrent_rpcs",
                                "max_grpc_streams_per_connection",
                                "max_grpc_metadata_bytes",
                                "header_timeout_ms",
                                "body_timeout_ms",
                                "answer_timeout_ms",
                                "handshake_timeout_ms",
                                "idle_timeout_ms",
                                "max_grpc_concurrent_rpcs_per_peer",
                                "max_grpc_connections",
                                "max_grpc_connections_per_peer",
                                "grpc_buffer_bytes",
                                "grpc_buffer_bytes_per_connection",
                                "grpc_buffer_bytes_per_peer",
                                "grpc_inflate_pending"})
            gConfig.L(key);
        int port = 0;
        openPublicPort(port);
        say("listening " + std::to_string(port));
    }
    catch (const std::exception& error)
    {
        say(std::string("error ") + error.what());
        return 1;
    }
    std::thread loop(serve);
    // Model blocks until stdin ends (the Python edge is gone, or closed it to stop us).
    try
    {
        for (;;)
        {
            lines.clear();
            if (!readBlock(std::cin, lines)) break;
            std::atomic_store(&gModels, readModels(lines));
        }
    }
    catch (const std::exception& error)
    {
        say(std::string("error ") + error.what());
    }
    stopServing();
    loop.join();
    return 0;
}
