#include "server/peer_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>

namespace gossamer::server {

namespace {

// Numeric ip and port of a socket address (false for non-IP families).
bool ip_port(const sockaddr_storage& a, socklen_t len, std::string* ip, int* port) {
  if (a.ss_family != AF_INET && a.ss_family != AF_INET6) return false;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  *ip = host;
  *port = std::atoi(serv);
  return true;
}

bool matches(int fd, const PeerAddress& want) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  std::string ip;
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  if (!ip_port(a, len, &ip, &port) || port != want.local_port || ip != want.local_ip) return false;
  len = sizeof a;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  return ip_port(a, len, &ip, &port) && port == want.remote_port && ip == want.remote_ip;
}

}  // namespace

int find_socket(const PeerAddress& addr) {
  if (addr.remote_port < 0 || addr.local_port < 0) return -1;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  const int self = dirfd(d);
  int found = -1;
  while (const dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == self) continue;
    if (matches(static_cast<int>(fd), addr)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(d);
  return found;
}

bool peer_closed(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  int r;
  do {
    r = poll(&p, 1, 0);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return false;
}

bool PeerWatch::disconnected() {
  if (closed_) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return false;
  next_ = now + interval_;
  if (!looked_up_) {
    looked_up_ = true;
    fd_ = find_socket(addr_);
  }
  if (fd_ >= 0 && peer_closed(fd_)) closed_ = true;
  return closed_;
}

}  // namespace gossamer::server
