//===- OutOfMemory.cpp - a clear message when memory runs out -------------===//
//
// The tools' global operator new: an allocation that fails ends the
// process with "out of memory: N bytes wanted" (and the limit, when
// --max-memory set one) and exit status 1, instead of std::bad_alloc
// unwinding into LLVM's "out of memory" abort or an uncaught exception.
// Nothing here allocates: the message is formatted on the stack.
//
//===----------------------------------------------------------------------===//
#include "tools/OutOfMemory.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <string>
#include <cstdlib>
#include <cstring>
#include <new>
#include <csignal>
#include <sys/resource.h>
#include <unistd.h>

namespace {

// Until main names the tool (static constructors allocate too), the name it
// was started by.
const char *gTool = nullptr;
unsigned long long gLimit = 0;

[[noreturn]] void outOfMemory(std::size_t wanted) {
  char what[64];
  std::snprintf(what, sizeof what, "an allocation of %zu bytes failed", wanted);
  ds::tools::reportOutOfMemory(what);
}

void *allocate(std::size_t n) {
  if (void *p = std::malloc(n ? n : 1)) return p;
  outOfMemory(n);
}

void *allocateAligned(std::size_t n, std::align_val_t a) {
  std::size_t align = static_cast<std::size_t>(a);
  std::size_t size = (n + align - 1) / align * align; // aligned_alloc wants a multiple
  if (void *p = std::aligned_alloc(align, size ? size : align)) return p;
  outOfMemory(n);
}

} // namespace

namespace ds::tools {

void reportOutOfMemory(const char *what) {
  const char *tool = gTool ? gTool : program_invocation_short_name;
  char msg[384];
  int n = gLimit ? std::snprintf(msg, sizeof msg,
                                 "%s: error: out of memory: %s under --max-memory %llu bytes; "
                                 "raise the limit or use a machine with more memory\n",
                                 tool, what, gLimit)
                 : std::snprintf(msg, sizeof msg,
                                 "%s: error: out of memory: %s; use a machine with more memory "
                                 "(or a smaller model)\n",
                                 tool, what);
  if (n > 0) (void)!::write(2, msg, static_cast<size_t>(n) < sizeof msg ? n : sizeof msg - 1);
  std::_Exit(1);
}

void setOutOfMemoryTool(const char *tool) { gTool = tool; }

void reportFatalError(const char *reason, bool crashDiag) {
  struct rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    char what[256];
    std::snprintf(what, sizeof what, "%s (under the address-space limit of %llu MiB)",
                  reason ? reason : "a fatal error", static_cast<unsigned long long>(as.rlim_cur >> 20));
    reportOutOfMemory(what);
  }
  char msg[512];
  int n = std::snprintf(msg, sizeof msg, "LLVM ERROR: %s\n", reason ? reason : "");
  if (n > 0) (void)!::write(2, msg, static_cast<size_t>(n) < sizeof msg ? n : sizeof msg - 1);
  if (crashDiag) std::abort();
  std::_Exit(1);
}

namespace {
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
struct sigaction gPrevious[sizeof kCrashSignals / sizeof kCrashSignals[0]];
unsigned gWatchdogSeconds = 10;

// Room for the handler when the crash is a stack overflow.
alignas(16) char gAltStack[64 * 1024];

void onCrash(int sig, siginfo_t *info, void *context) {
  ::alarm(gWatchdogSeconds); // SIGALRM's default action ends the process
  // Under an address-space limit (ulimit -v, --max-memory) libraries do not
  // all survive a failed mapping: oneDNN's JIT writes to the code buffer it
  // could not map. That is running out of memory, said as such.
  struct rlimit as{};
  if (sig == SIGSEGV && ::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    char what[160];
    std::snprintf(what, sizeof what,
                  "a library crashed (SIGSEGV) under the address-space limit of %llu MiB "
                  "(ulimit -v or --max-memory), most likely on a mapping that failed",
                  static_cast<unsigned long long>(as.rlim_cur >> 20));
    ds::tools::reportOutOfMemory(what);
  }
  for (size_t i = 0; i < sizeof kCrashSignals / sizeof kCrashSignals[0]; ++i) {
    if (kCrashSignals[i] != sig) continue;
    const struct sigaction &prev = gPrevious[i];
    if (prev.sa_flags & SA_SIGINFO) {
      prev.sa_sigaction(sig, info, context);
      return;
    }
    if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
      prev.sa_handler(sig);
      return;
    }
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}
} // namespace

void armCrashWatchdog(unsigned seconds) {
  gWatchdogSeconds = seconds;
  stack_t current{};
  if (::sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE)) {
    stack_t alt{};
    alt.ss_sp = gAltStack;
    alt.ss_size = sizeof gAltStack;
    ::sigaltstack(&alt, nullptr);
  }
  struct sigaction ours{};
  ours.sa_sigaction = onCrash;
  ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  for (size_t i = 0; i < sizeof kCrashSignals / sizeof kCrashSignals[0]; ++i)
    ::sigaction(kCrashSignals[i], &ours, &gPrevious[i]);
}

std::string limitMemory(unsigned long long bytes) {
  // What is mapped already (the tool's libraries are most of it), plus room
  // to read a model: below that, the first mmap of C code fails.
  unsigned long long pages = 0;
  if (std::FILE *f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  const unsigned long long mapped = pages * static_cast<unsigned long long>(::sysconf(_SC_PAGESIZE));
  // Rounded up to 32 MiB, so that the least (which moves with what the
  // loader mapped) reads the same from run to run.
  const unsigned long long least = (mapped + (64ull << 20) + (32ull << 20) - 1) / (32ull << 20) * (32ull << 20);
  if (bytes < least)
    return "the limit " + std::to_string(bytes) + " bytes is below the " + std::to_string(least) +
           " bytes this process needs: the " + std::to_string(mapped) +
           " it maps before reading anything and 64 MiB to read a model; give at least " +
           std::to_string(least >> 20) + "MiB";
  struct rlimit r{bytes, bytes};
  if (::setrlimit(RLIMIT_AS, &r) != 0) return std::string("setrlimit refused it: ") + std::strerror(errno);
  gLimit = bytes;
  return "";
}

std::optional<unsigned long long> parseByteSize(std::string_view s) {
  auto trim = [](std::string_view v) {
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
    return v;
  };
  s = trim(s);
  double scale = 1;
  for (auto [suffix, factor] : {std::pair<std::string_view, double>{"KiB", 1024.0},
                                {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                                {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6},
                                {"GB", 1e9}, {"TB", 1e12}, {"B", 1}})
    if (s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix) {
      s.remove_suffix(suffix.size());
      scale = factor;
      break;
    }
  std::string number(trim(s));
  char *end = nullptr;
  errno = 0;
  double v = number.empty() ? 0 : std::strtod(number.c_str(), &end);
  if (number.empty() || errno || end != number.c_str() + number.size() || !(v > 0) ||
      v * scale > 1.8e19)
    return std::nullopt;
  return static_cast<unsigned long long>(v * scale);
}

} // namespace ds::tools

void *operator new(std::size_t n) { return allocate(n); }
void *operator new[](std::size_t n) { return allocate(n); }
void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return std::malloc(n ? n : 1); }
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return std::malloc(n ? n : 1); }
void *operator new(std::size_t n, std::align_val_t a) { return allocateAligned(n, a); }
void *operator new[](std::size_t n, std::align_val_t a) { return allocateAligned(n, a); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
