//===- OutOfMemory.h - a clear message when memory runs out ---------------===//
#ifndef DS_TOOLS_OUTOFMEMORY_H
#define DS_TOOLS_OUTOFMEMORY_H

namespace ds::tools {

/// The tool named in the out-of-memory message ("ds-opt", "ds-run").
void setOutOfMemoryTool(const char *tool);
/// Prints "TOOL: error: out of memory: WHAT" (with the --max-memory limit)
/// without allocating, and exits with status 1.
[[noreturn]] void reportOutOfMemory(const char *what);
/// Caps the process's address space (--max-memory); false if refused.
bool limitMemory(unsigned long long bytes);

} // namespace ds::tools

#endif // DS_TOOLS_OUTOFMEMORY_H
