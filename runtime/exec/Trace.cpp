#include "runtime/exec/Trace.h"
#include "runtime/io/Files.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ds::rt {
namespace {

std::string jsonEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
      continue;
    }
    out.push_back(c);
  }
  return out;
}

} // namespace

absl::Status writeTrace(const std::string &path, const std::vector<TraceEvent> &events,
                        Comm &world) {
  const int rank = world.rank(), n = world.size();
  std::string mine;
  absl::StrAppendFormat(&mine,
                        "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":"
                        "\"rank %d\"}},\n"
                        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":0,\"args\":"
                        "{\"name\":\"compute\"}},\n"
                        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":1,\"args\":"
                        "{\"name\":\"communication\"}}",
                        rank, rank, rank, rank);
  for (const TraceEvent &e : events)
    absl::StrAppendFormat(&mine,
                          ",\n{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,"
                          "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"bytes\":%u,\"node\":\"%s\"}}",
                          jsonEscape(e.name), e.stream ? "collective" : "kernel", rank, e.stream,
                          e.startUs, e.durUs, e.bytes, jsonEscape(e.location));
  // Rank 0 gathers the fragments: sizes first, then the padded bytes.
  std::vector<int64_t> sizes(n);
  int64_t size = static_cast<int64_t>(mine.size());
  DS_RETURN_IF_ERROR(world.allGather(&size, sizes.data(), 1, plan::I64));
  int64_t longest = 0;
  for (int64_t s : sizes) longest = std::max(longest, s);
  mine.resize(longest, ' ');
  std::vector<char> all(static_cast<size_t>(longest) * n);
  DS_RETURN_IF_ERROR(world.allGather(mine.data(), all.data(), longest, plan::U8));
  if (rank != 0) return absl::OkStatus();
  std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (int r = 0; r < n; ++r) {
    if (r) text += ",\n";
    text.append(all.data() + static_cast<size_t>(r) * longest, sizes[r]);
  }
  text += "\n]}\n";
  if (absl::Status st = replaceFile(path, text.data(), text.size()); !st.ok())
    return absl::DataLossError(absl::StrCat("cannot write trace ", path, ": ", st.message()));
  return absl::OkStatus();
}

} // namespace ds::rt
