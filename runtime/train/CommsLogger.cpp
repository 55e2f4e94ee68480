#include "runtime/train/CommsLogger.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_format.h"

namespace ds::rt {

std::string CommsLogger::deepspeedName(const std::string &kernel) {
  if (kernel == "all_reduce" || kernel == "broadcast") return kernel;
  if (kernel == "all_gather") return "all_gather_into_tensor";
  if (kernel == "reduce_scatter") return "reduce_scatter_tensor";
  if (kernel == "all_to_all") return "all_to_all_single";
  if (kernel == "compressed_all_reduce") return "compressed_allreduce";
  return "";
}

std::string CommsLogger::sizeString(uint64_t bytes) {
  if (bytes == 0) return "0B";
  static const char *kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  int unit = 0;
  double scaled = static_cast<double>(bytes);
  while (scaled >= 1024 && unit < 6) scaled /= 1024, ++unit;
  // Python's str(round(x, 2)): at most two decimals, at least one.
  std::string text = absl::StrFormat("%.2f", scaled);
  if (text.back() == '0') text.pop_back();
  return text + " " + kUnits[unit];
}

std::pair<double, double> CommsLogger::bandwidth(const std::string &op, uint64_t bytes, double ms,
                                                 int ranks) {
  const double n = std::max(1, ranks), d = std::max(ms, 1e-9);
  double size = static_cast<double>(bytes), tput, busbw;
  if (op == "all_to_all_single" || op == "compressed_allreduce") {
    tput = size / d;
    busbw = tput * (n - 1) / n;
  } else if (op == "all_gather_into_tensor" || op == "reduce_scatter_tensor") {
    size *= n;
    tput = size / d;
    busbw = tput * (n - 1) / n;
  } else if (op == "all_reduce") {
    tput = size * 2 / d;
    busbw = size / d * (2 * (n - 1) / n);
  } else { // broadcast
    tput = busbw = size / d;
  }
  // bytes per ms to Gbps
  return {tput * 8 / 1e6, busbw * 8 / 1e6};
}

double CommsLogger::trimmedMean(std::vector<double> values, double trim) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const int64_t n = static_cast<int64_t>(values.size());
  const int64_t k = static_cast<int64_t>(std::nearbyint(static_cast<double>(n) * trim));
  if (n - 2 * k <= 0) return 0;
  return std::accumulate(values.begin() + k, values.end() - k, 0.0) / static_cast<double>(n - 2 * k);
}

std::string CommsLogger::add(const std::vector<Session::CommRecord> &records) {
  std::string lines;
  for (const Session::CommRecord &r : records) {
    const std::string op = deepspeedName(r.kernel);
    if (op.empty()) continue;
    if (!config_.prof_all() &&
        std::find(config_.prof_ops().begin(), config_.prof_ops().end(), op) ==
            config_.prof_ops().end())
      continue;
    const std::string name =
        config_.debug() ? op + " | [Caller Func: " + r.location + "]" : op;
    const double ms = r.seconds * 1e3;
    auto [algbw, busbw] = bandwidth(op, r.bytes, ms, r.ranks);
    auto it = std::find_if(ops_.begin(), ops_.end(), [&](const auto &e) { return e.first == name; });
    if (it == ops_.end()) it = ops_.insert(ops_.end(), {name, {}});
    Entry &e = it->second[r.bytes];
    ++e.count;
    e.ms.push_back(ms);
    e.algbw.push_back(algbw);
    e.busbw.push_back(busbw);
    if (config_.verbose())
      lines += absl::StrFormat(
          "[Rank 0] comm op: %s | time (ms): %.2f | msg size: %s | algbw (Gbps): %.2f | busbw "
          "(Gbps): %.2f\n",
          name, ms, sizeString(r.bytes), algbw, busbw);
  }
  return lines;
}

std::string CommsLogger::summary() const {
  if (ops_.empty()) return "";
  std::string out = absl::StrFormat("%-20s%-20s%-20s%-20s%-20s%-20s%-20s\n", "Comm. Op",
                                    "Message Size", "Count", "Total Latency(ms)",
                                    "Avg Latency(ms)", "tput_avg (Gbps)", "busbw_avg (Gbps)");
  for (const auto &[name, sizes] : ops_) {
    out += name + "\n";
    for (const auto &[bytes, e] : sizes) {
      const double total = std::accumulate(e.ms.begin(), e.ms.end(), 0.0);
      out += absl::StrFormat("%-20s%-20s%-20d%-20.2f%-20.2f%-20.2f%-20.2f\n", " ",
                             sizeString(bytes), e.count, total, trimmedMean(e.ms, 0.1),
                             trimmedMean(e.algbw, 0.1), trimmedMean(e.busbw, 0.1));
    }
  }
  return out;
}

} // namespace ds::rt
