// DeepSpeed's csv_monitor (deepspeed/monitor/csv_monitor.py), same layout:
// rank 0 appends each event (name, value, step) to
// <output_path>/<job_name>/<name with '/' and ' ' as '_'>.csv, writing the
// header "step,<last part of the name>" the first time this process writes
// that file. Steps count samples, as DeepSpeed's Train/Samples/* events do.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/proto/plan.pb.h"

namespace ds::rt {

struct MonitorEvent {
  std::string name; // "Train/Samples/train_loss"
  double value;
  int64_t step;
};

class CsvMonitor {
public:
  /// Creates the directory now, so a bad path fails before training.
  static absl::StatusOr<std::unique_ptr<CsvMonitor>> open(const plan::CsvMonitor &config);
  absl::Status write(const std::vector<MonitorEvent> &events);
  const std::string &directory() const { return dir_; }

private:
  std::string dir_;
  std::set<std::string> started_;
};

/// A double as Python's repr writes it (shortest round trip, "1.0" not "1").
std::string pythonFloat(double v);

} // namespace ds::rt
