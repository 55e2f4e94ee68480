// DeepSpeed's monitors (deepspeed/monitor/), rank 0 only; steps count
// samples, as DeepSpeed's Train/Samples/* events do.
//  - csv_monitor, same layout: each event (name, value, step) is appended to
//    <output_path>/<job_name>/<name with '/' and ' ' as '_'>.csv, with the
//    header "step,<last part of the name>" the first time this process
//    writes that file.
//  - tensorboard: scalar summaries in one TensorBoard event file,
//    <output_path>/<job_name>/events.out.tfevents.<seconds>.<host>.<pid>.ds,
//    TFRecord-framed (length, masked CRC-32C, payload, masked CRC-32C) as
//    TensorBoard reads it; flushed after every step.
#pragma once

#include <cstdio>
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

class Monitor {
public:
  virtual ~Monitor() = default;
  virtual absl::Status write(const std::vector<MonitorEvent> &events) = 0;
};

class CsvMonitor : public Monitor {
public:
  /// Creates the directory now, so a bad path fails before training.
  static absl::StatusOr<std::unique_ptr<CsvMonitor>> open(const plan::CsvMonitor &config);
  absl::Status write(const std::vector<MonitorEvent> &events) override;
  const std::string &directory() const { return dir_; }

private:
  std::string dir_;
  std::set<std::string> started_;
};

class TensorBoardMonitor : public Monitor {
public:
  /// Creates the directory and the event file (with its version record).
  static absl::StatusOr<std::unique_ptr<TensorBoardMonitor>> open(const plan::CsvMonitor &config);
  ~TensorBoardMonitor() override;
  absl::Status write(const std::vector<MonitorEvent> &events) override;
  const std::string &path() const { return path_; }

private:
  absl::Status record(const std::string &payload);
  std::string path_;
  std::FILE *file_ = nullptr;
};

/// The monitors a training plan enables (none when not rank 0).
absl::StatusOr<std::vector<std::unique_ptr<Monitor>>> openMonitors(const plan::Training &t,
                                                                  bool root);

/// CRC-32C (Castagnoli), the checksum of TFRecord framing.
uint32_t crc32c(const void *data, size_t size);

/// A double as Python's repr writes it (shortest round trip, "1.0" not "1").
std::string pythonFloat(double v);

} // namespace ds::rt
