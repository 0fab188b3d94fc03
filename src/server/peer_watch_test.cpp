// PeerWatch over real loopback TCP connections: the accepted socket is found by its address
// pair, a live peer (even one with a pipelined request pending) is not "closed", a FIN or RST is.
#include "server/peer_watch.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace gossamer::server {
namespace {

struct Conn {
  int listener = -1, client = -1, accepted = -1;
  PeerAddress server_side;  // as the HTTP handler sees it: remote = client, local = server
  ~Conn() {
    for (int fd : {listener, client, accepted})
      if (fd >= 0) close(fd);
  }
};

void connect_pair(Conn* c) {
  c->listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(c->listener, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(c->listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(c->listener, 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(c->listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  c->client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(c->client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  c->accepted = accept(c->listener, nullptr, nullptr);
  ASSERT_GE(c->accepted, 0);
  sockaddr_in cl{};
  len = sizeof cl;
  ASSERT_EQ(getsockname(c->client, reinterpret_cast<sockaddr*>(&cl), &len), 0);
  c->server_side = PeerAddress{"127.0.0.1", ntohs(cl.sin_port), "127.0.0.1", ntohs(a.sin_port)};
}

bool closed_within(int fd, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (peer_closed(fd)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(PeerWatch, FindsTheAcceptedSocketNotTheClient) {
  Conn c;
  connect_pair(&c);
  EXPECT_EQ(find_socket(c.server_side), c.accepted);
  PeerAddress wrong = c.server_side;
  wrong.remote_port = c.server_side.remote_port == 1 ? 2 : 1;
  EXPECT_EQ(find_socket(wrong), -1);
  EXPECT_EQ(find_socket(PeerAddress{}), -1);
}

TEST(PeerWatch, LiveAndPipelinedPeersAreNotClosed) {
  Conn c;
  connect_pair(&c);
  EXPECT_FALSE(peer_closed(c.accepted));
  const char req[] = "GET /health HTTP/1.1\r\n\r\n";  // a pipelined next request
  ASSERT_EQ(write(c.client, req, sizeof req - 1), static_cast<ssize_t>(sizeof req - 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(peer_closed(c.accepted));
  char buf[64];
  EXPECT_EQ(recv(c.accepted, buf, sizeof buf, MSG_DONTWAIT), static_cast<ssize_t>(sizeof req - 1))
      << "peer_closed must not consume data";
}

TEST(PeerWatch, FinIsDetected) {
  Conn c;
  connect_pair(&c);
  PeerWatch w(c.server_side, std::chrono::milliseconds(0));
  EXPECT_FALSE(w.disconnected());
  EXPECT_EQ(w.fd(), c.accepted);
  close(c.client);
  c.client = -1;
  EXPECT_TRUE(closed_within(c.accepted, std::chrono::seconds(2)));
  EXPECT_TRUE(w.disconnected());
}

TEST(PeerWatch, ResetIsDetected) {
  Conn c;
  connect_pair(&c);
  linger l{1, 0};  // close with RST
  ASSERT_EQ(setsockopt(c.client, SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
  close(c.client);
  c.client = -1;
  EXPECT_TRUE(closed_within(c.accepted, std::chrono::seconds(2)));
}

TEST(PeerWatch, FirstCheckWaitsOneInterval) {
  Conn c;
  connect_pair(&c);
  PeerWatch w(c.server_side, std::chrono::milliseconds(200));
  close(c.client);
  c.client = -1;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(w.disconnected());  // not looked at yet
  EXPECT_EQ(w.fd(), -1);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_TRUE(w.disconnected());
}

}  // namespace
}  // namespace gossamer::server
