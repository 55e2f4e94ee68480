//===- OutOfMemory.h - a clear message when memory runs out ---------------===//
#ifndef DS_TOOLS_OUTOFMEMORY_H
#define DS_TOOLS_OUTOFMEMORY_H

#include <optional>
#include <string>
#include <string_view>

namespace ds::tools {

/// The tool named in the out-of-memory message ("ds-opt", "ds-run").
void setOutOfMemoryTool(const char *tool);
/// Prints "TOOL: error: out of memory: WHAT" (with the --max-memory limit)
/// without allocating, and exits with status 1.
[[noreturn]] void reportOutOfMemory(const char *what);
/// LLVM's fatal error handler: under an address-space limit, reported as
/// running out of memory (exit 1); otherwise "LLVM ERROR: reason" and, as
/// LLVM does, abort() when it asks for crash diagnostics, else exit 1.
[[noreturn]] void reportFatalError(const char *reason, bool crashDiag);
/// Caps the process's address space (--max-memory); false if refused.
/// Empty when the limit is set; else why not (a limit below the address
/// space the process already maps, libraries included, would fail
/// allocations outside operator new, in code that cannot report them).
std::string limitMemory(unsigned long long bytes);
/// A crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) first arms a
/// `seconds` alarm, then runs the handler installed before (LLVM's stack
/// trace): a crash inside malloc would otherwise deadlock that handler,
/// which allocates, and the crash would become a hang. A SIGSEGV under an
/// address-space limit is reported as running out of memory (exit 1): it is
/// a library's failed mapping. Call after llvm::InitLLVM and after the
/// tool's own handlers, which it forwards to.
void armCrashWatchdog(unsigned seconds);
/// "8GiB", "512MiB", "64KiB", "3GB", "2e9", "1000": bytes (> 0); nullopt
/// for anything else (--max-memory, --device-memory).
std::optional<unsigned long long> parseByteSize(std::string_view text);

} // namespace ds::tools

#endif // DS_TOOLS_OUTOFMEMORY_H
