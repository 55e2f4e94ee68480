#include "runtime/train/StopSignals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

namespace ds::rt {
namespace {

std::atomic<bool> graceful{false};
std::atomic<int> requested{0};

sigset_t stopSet() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGINT);
  return s;
}

// Async-signal-safe: atomics, write(2), signal(2) and raise(3) only.
extern "C" void onStopSignal(int sig) {
  int none = 0;
  if (graceful.load() && requested.compare_exchange_strong(none, sig)) {
    static const char msg[] = "\nds-run: stop requested; finishing the step in flight "
                              "(send the signal again to stop at once)\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ignored;
    return;
  }
  // Not training, or asked twice: die of the signal as if unhandled. The
  // signal is blocked while its handler runs, so it lands on return.
  std::signal(sig, SIG_DFL);
  raise(sig);
}

} // namespace

void installStopSignals() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = onStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    sigset_t s = stopSet();
    pthread_sigmask(SIG_BLOCK, &s, nullptr);
    // The receiver: the one thread ds starts with the signals unblocked.
    try {
      std::thread([] {
        sigset_t u = stopSet();
        pthread_sigmask(SIG_UNBLOCK, &u, nullptr);
        for (;;) pause();
      }).detach();
    } catch (const std::system_error &) {
      // No thread to spare (an address-space limit): the calling thread
      // takes the signals; any thread's handler only sets a flag.
      pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
    }
  });
}

void armGracefulStop(bool armed) {
  installStopSignals();
  if (armed) requested.store(0);
  graceful.store(armed);
}

int stopRequested() { return requested.load(); }

} // namespace ds::rt
