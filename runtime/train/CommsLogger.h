// DeepSpeed's comms logger (deepspeed/utils/comms_logging.py) over the
// plan's collectives: per collective and message size, the count, total
// and trimmed-mean latency and the algorithmic and bus bandwidth, printed
// as DeepSpeed's log_all prints them; with `verbose` one line per
// collective as it ends.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/exec/Session.h"
#include "runtime/proto/plan.pb.h"

namespace ds::rt {

class CommsLogger {
public:
  explicit CommsLogger(const ds::plan::CommsLogger &config) : config_(config) {}

  /// Logs one run's collectives (those the config selects); returns the
  /// verbose lines for them ("" unless `verbose`).
  std::string add(const std::vector<Session::CommRecord> &records);
  /// DeepSpeed's log_all table of everything logged so far ("" when nothing was).
  std::string summary() const;

  /// DeepSpeed's name of a ds collective kernel (all_gather ->
  /// all_gather_into_tensor, ...); "" for kernels that are not collectives.
  static std::string deepspeedName(const std::string &kernel);
  /// DeepSpeed's convert_size: "0B", "512.0 B", "4.0 KB", "1.25 MB".
  static std::string sizeString(uint64_t bytes);
  /// DeepSpeed's calc_bw_log: (algorithmic, bus) bandwidth in Gbps of a
  /// collective over `ranks` moving `bytes` (its input) in `ms`.
  static std::pair<double, double> bandwidth(const std::string &op, uint64_t bytes, double ms,
                                             int ranks);
  /// DeepSpeed's trim_mean: the mean without the round(n * trim) smallest
  /// and largest values (Python's round: half to even).
  static double trimmedMean(std::vector<double> values, double trim);

private:
  struct Entry {
    int64_t count = 0;
    std::vector<double> ms, algbw, busbw;
  };
  ds::plan::CommsLogger config_;
  /// By record name in first-logged order, then by message size.
  std::vector<std::pair<std::string, std::map<uint64_t, Entry>>> ops_;
};

} // namespace ds::rt
