#include "common/mapped_read.h"

#include <csetjmp>
#include <csignal>
#include <mutex>

namespace gossamer {
namespace {

thread_local sigjmp_buf* tls_jump = nullptr;  // set while this thread runs a guarded read
thread_local const void* tls_addr = nullptr;
struct sigaction g_previous;  // the disposition before ours (ASan's, the default, ...)

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (tls_jump != nullptr) {
    tls_addr = info->si_addr;
    siglongjmp(*tls_jump, 1);
  }
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  std::signal(SIGBUS, SIG_DFL);  // not a guarded read: the fault ends the process as before
  std::raise(SIGBUS);
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous);
  });
}

}  // namespace

bool guarded_mapped_read(const std::function<void()>& read, const void** fault_addr) {
  install_once();
  sigjmp_buf* const outer = tls_jump;  // a guarded read may run inside another (thread pools)
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) != 0) {  // back from on_sigbus: the read faulted
    tls_jump = outer;
    if (fault_addr != nullptr) *fault_addr = tls_addr;
    return false;
  }
  tls_jump = &jump;
  read();
  tls_jump = outer;
  return true;
}

std::string mapped_read_fault(const std::string& what) {
  return what +
         " faulted (SIGBUS): the file is shorter than when it was opened (truncated or rewritten "
         "while loading?)";
}

}  // namespace gossamer
