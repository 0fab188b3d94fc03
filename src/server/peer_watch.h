// Client-disconnect detection for non-streaming requests. cpp-httplib 0.11 gives a handler no
// access to its socket and writes nothing before the handler returns, so a client that went away
// is otherwise only noticed when the response is written. PeerWatch finds the handler's connected
// socket by its address pair (the only socket of this process with that local + remote ip:port)
// and polls it for the peer's FIN / RST without reading anything.
#pragma once

#include <chrono>
#include <string>

namespace gossamer::server {

struct PeerAddress {
  std::string remote_ip;
  int remote_port = -1;
  std::string local_ip;
  int local_port = -1;
};

class PeerWatch {
 public:
  explicit PeerWatch(PeerAddress addr,
                     std::chrono::milliseconds interval = std::chrono::milliseconds(100))
      : addr_(std::move(addr)),
        interval_(interval),
        next_(std::chrono::steady_clock::now() + interval) {}

  // True once the peer has closed or reset the connection. Checks the socket at most once per
  // `interval`, the first time one interval after construction (so short requests pay nothing);
  // the first check looks the socket up in /proc/self/fd. Never blocks; false when
  // the socket cannot be found (then the request runs on, bounded by its timeout).
  bool disconnected();
  // The socket found (-1: not looked up yet or not found). For tests.
  int fd() const { return fd_; }

 private:
  PeerAddress addr_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point next_{};
  bool looked_up_ = false;
  bool closed_ = false;
  int fd_ = -1;
};

// The connected TCP socket of this process with exactly these addresses, or -1.
int find_socket(const PeerAddress& addr);
// True when the peer of connected socket `fd` has shut down its side or reset it (a pending
// request pipelined before the FIN does not count as closed). Non-blocking, reads nothing.
bool peer_closed(int fd);

}  // namespace gossamer::server
