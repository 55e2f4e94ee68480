#include "runtime/train/FlopsProfiler.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ds::rt {
namespace {

struct Row {
  double seconds = 0, flops = 0;
  int64_t count = 0;
};

/// "node '/blocks.0/attn/c_attn/MatMul' (MatMul, ...)" -> the module path
/// components ["blocks.0", "attn", "c_attn"] (the op's own name dropped).
std::vector<std::string> modulePath(const std::string &location) {
  size_t a = location.find("'/"), b = a == std::string::npos ? a : location.find('\'', a + 1);
  if (a == std::string::npos || b == std::string::npos) return {};
  std::vector<std::string> parts = absl::StrSplit(location.substr(a + 2, b - a - 2), '/',
                                                  absl::SkipEmpty());
  if (!parts.empty()) parts.pop_back();
  return parts;
}

std::string human(double v, const char *unit) {
  const char *prefix[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (v >= 1000 && i < 5) v /= 1000, ++i;
  return absl::StrFormat("%.2f %s%s", v, prefix[i], unit);
}

} // namespace

std::string flopsProfileReport(const plan::FlopsProfiler &config, const FlopsProfileInput &in) {
  double flops = 0, computeSeconds = 0;
  std::map<std::string, Row> byKernel;
  std::vector<std::map<std::string, Row>> byDepth;
  for (const StepTiming &t : in.steps) {
    flops += t.flops;
    computeSeconds += t.seconds;
    Row &k = byKernel[t.kernel];
    k.seconds += t.seconds, k.flops += t.flops, ++k.count;
    std::vector<std::string> path = modulePath(t.location);
    std::string prefix;
    for (size_t d = 0; d < path.size(); ++d) {
      if (config.module_depth() >= 0 && static_cast<int64_t>(d) >= config.module_depth()) break;
      prefix += "/" + path[d];
      if (byDepth.size() <= d) byDepth.resize(d + 1);
      Row &m = byDepth[d][prefix];
      m.seconds += t.seconds, m.flops += t.flops, ++m.count;
    }
  }
  std::string out;
  auto line = [&](const std::string &what, const std::string &value) {
    absl::StrAppend(&out, absl::StrFormat("%-60s %s\n", what + ":", value));
  };
  absl::StrAppend(&out, "\n-------------------------- DeepSpeed Flops Profiler --------------------------\n");
  absl::StrAppend(&out, absl::StrFormat("Profile Summary at step %d:\n", in.step));
  absl::StrAppend(&out, "Notations: MACs = multiply-accumulates, FLOPs = 2 MACs (matrix products "
                        "and convolutions), latency = wall time\n\n");
  line("world size", absl::StrCat(in.worldSize));
  line("data parallel size", absl::StrCat(in.worldSize));
  line("batch size per rank", absl::StrCat(in.microBatch));
  line("params per rank", human(static_cast<double>(in.parameters), ""));
  line("fwd+bwd+step MACs per rank", human(flops / 2, "MACs"));
  line("fwd+bwd+step flops per rank", human(flops, "FLOPs"));
  line("fwd+bwd+step latency", absl::StrFormat("%.2f ms", in.seconds * 1e3));
  line("fwd+bwd+step FLOPS per rank = flops / latency",
       human(in.seconds > 0 ? flops / in.seconds : 0, "FLOPS"));
  line("kernels' own time (compute steps)", absl::StrFormat("%.2f ms", computeSeconds * 1e3));

  auto table = [&](const std::string &title, std::vector<std::pair<std::string, Row>> rows,
                   size_t top) {
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
      return a.second.flops != b.second.flops ? a.second.flops > b.second.flops
                                              : a.second.seconds > b.second.seconds;
    });
    if (top && rows.size() > top) rows.resize(top);
    absl::StrAppend(&out, "\n", title, "\n");
    absl::StrAppend(&out, absl::StrFormat("  %-40s %6s %12s %7s %14s %14s %12s\n", "name", "steps",
                                          "latency", "%", "FLOPs", "MACs", "FLOP/s"));
    for (const auto &[name, r] : rows)
      absl::StrAppend(&out, absl::StrFormat(
                                "  %-40s %6d %9.3f ms %6.1f%% %14s %14s %12s\n", name, r.count,
                                r.seconds * 1e3, computeSeconds > 0 ? 100 * r.seconds / computeSeconds : 0,
                                human(r.flops, "FLOPs"), human(r.flops / 2, "MACs"),
                                r.seconds > 0 && r.flops > 0 ? human(r.flops / r.seconds, "FLOPS")
                                                             : std::string("-")));
  };
  table("----------------------------- by kernel -----------------------------",
        {byKernel.begin(), byKernel.end()}, 0);
  absl::StrAppend(&out, "\n----------------------------- Aggregated Profile per rank -----------------------------\n");
  absl::StrAppend(&out, absl::StrFormat("Top %d modules in terms of FLOPs at each depth "
                                        "(forward and backward of a module together):\n",
                                        config.top_modules()));
  for (size_t d = 0; d < byDepth.size(); ++d)
    table(absl::StrFormat("depth %d:", d), {byDepth[d].begin(), byDepth[d].end()},
          static_cast<size_t>(config.top_modules()));
  if (config.detailed()) {
    std::vector<StepTiming> slow = in.steps;
    std::sort(slow.begin(), slow.end(),
              [](const StepTiming &a, const StepTiming &b) { return a.seconds > b.seconds; });
    absl::StrAppend(&out, "\n------------------------------ Detailed Profile (slowest steps) ------------------------------\n");
    for (size_t i = 0; i < slow.size() && i < 20; ++i)
      absl::StrAppend(&out, absl::StrFormat("  %9.3f ms  %-18s %14s  %s\n", slow[i].seconds * 1e3,
                                            slow[i].kernel, human(slow[i].flops, "FLOPs"),
                                            slow[i].location));
  }
  absl::StrAppend(&out, "------------------------------------------------------------------------------\n");
  return out;
}

} // namespace ds::rt
