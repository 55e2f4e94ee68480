#include "runtime/train/Monitor.h"

#include <sys/stat.h>

#include "runtime/io/Files.h"

#include <array>
#include <cerrno>
#include <chrono>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/plan/Status.h"
#include "runtime/proto/tensorboard_event.pb.h"

namespace ds::rt {

std::string pythonFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, ec == std::errc() ? end : buf);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {
/// os.path.join(output_path, job_name), created (an empty output path is
/// relative, as in DeepSpeed).
absl::StatusOr<std::string> monitorDirectory(const plan::CsvMonitor &config, const char *what) {
  std::string dir = config.output_path().empty() ? config.job_name()
                                                  : config.output_path() + "/" + config.job_name();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(
        absl::StrCat(what, ": cannot create ", dir, ": ", ec.message()));
  return dir;
}
} // namespace

absl::StatusOr<std::unique_ptr<CsvMonitor>> CsvMonitor::open(const plan::CsvMonitor &config) {
  std::unique_ptr<CsvMonitor> m(new CsvMonitor());
  DS_ASSIGN_OR_RETURN(m->dir_, monitorDirectory(config, "csv_monitor"));
  // Its files are appended to as events arrive: a link among them (to the
  // data or the plan) is refused now, before the first step, not at it.
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(m->dir_, ec)) {
    if (entry.path().extension() != ".csv") continue;
    struct stat st;
    if (::lstat(entry.path().c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink > 1))
      return absl::InvalidArgumentError(absl::StrCat(
          "csv_monitor: ", entry.path().string(), S_ISLNK(st.st_mode) ? " is a symbolic link" : " has other names (hard links)",
          "; ds appends its own rows there and never through a link: remove it"));
  }
  return m;
}

absl::Status CsvMonitor::write(const std::vector<MonitorEvent> &events) {
  for (const MonitorEvent &e : events) {
    std::string file = absl::StrReplaceAll(e.name, {{"/", "_"}, {" ", "_"}});
    std::string header = e.name.substr(e.name.rfind('/') == std::string::npos
                                           ? 0
                                           : e.name.rfind('/') + 1);
    std::string path = dir_ + "/" + file + ".csv";
    DS_ASSIGN_OR_RETURN(std::FILE * f, openOutputStream(path, /*append=*/true, "csv_monitor",
                                                                 /*streams=*/false, /*ownFile=*/true));
    std::string text;
    if (started_.insert(file).second) absl::StrAppend(&text, "step,", header, "\r\n");
    // Python's csv writer ends rows with \r\n.
    absl::StrAppend(&text, e.step, ",", pythonFloat(e.value), "\r\n");
    int error = 0;
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) error = errno ? errno : EIO;
    if (std::fclose(f) != 0 && !error) error = errno ? errno : EIO;
    if (error)
      return absl::ResourceExhaustedError(
          absl::StrCat("csv_monitor: writing ", path, " failed: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

uint32_t crc32c(const void *data, size_t size) {
  // Bytewise table of the reflected polynomial 0x82F63B78; event records
  // are a few dozen bytes, so this is not worth a hardware path.
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (c & 1 ? 0x82F63B78u : 0u);
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (const auto *p = static_cast<const uint8_t *>(data); size--; ++p)
    crc = table[(crc ^ *p) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

namespace {
// TFRecord's masked CRC: a CRC of data that contains CRCs is weak.
uint32_t maskedCrc(const void *data, size_t size) {
  uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

double wallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
} // namespace

absl::StatusOr<std::unique_ptr<TensorBoardMonitor>>
TensorBoardMonitor::open(const plan::CsvMonitor &config) {
  std::unique_ptr<TensorBoardMonitor> m(new TensorBoardMonitor());
  DS_ASSIGN_OR_RETURN(std::string dir, monitorDirectory(config, "tensorboard"));
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  m->path_ = absl::StrCat(dir, "/events.out.tfevents.", static_cast<int64_t>(wallTime()), ".",
                          host, ".", ::getpid(), ".ds");
  DS_ASSIGN_OR_RETURN(m->file_, openOutputStream(m->path_, /*append=*/false, "tensorboard",
                                                      /*streams=*/false, /*ownFile=*/true));
  tensorboard::Event version;
  version.set_wall_time(wallTime());
  version.set_file_version("brain.Event:2");
  DS_RETURN_IF_ERROR(m->record(version.SerializeAsString()));
  return m;
}

TensorBoardMonitor::~TensorBoardMonitor() {
  if (file_) std::fclose(file_);
}

absl::Status TensorBoardMonitor::record(const std::string &payload) {
  uint8_t head[12];
  uint64_t len = payload.size();
  std::memcpy(head, &len, 8); // little-endian, as the format is
  uint32_t lenCrc = maskedCrc(head, 8);
  std::memcpy(head + 8, &lenCrc, 4);
  uint32_t dataCrc = maskedCrc(payload.data(), payload.size());
  bool ok = std::fwrite(head, 1, 12, file_) == 12 &&
            std::fwrite(payload.data(), 1, payload.size(), file_) == payload.size() &&
            std::fwrite(&dataCrc, 1, 4, file_) == 4;
  if (!ok) return absl::ResourceExhaustedError(absl::StrCat("tensorboard: writing ", path_, " failed"));
  return absl::OkStatus();
}

absl::Status TensorBoardMonitor::write(const std::vector<MonitorEvent> &events) {
  for (const MonitorEvent &e : events) {
    tensorboard::Event ev;
    ev.set_wall_time(wallTime());
    ev.set_step(e.step);
    tensorboard::Summary::Value *v = ev.mutable_summary()->add_value();
    v->set_tag(e.name);
    v->set_simple_value(static_cast<float>(e.value));
    DS_RETURN_IF_ERROR(record(ev.SerializeAsString()));
  }
  // Flushed per step: TensorBoard shows a run while it trains.
  if (std::fflush(file_) != 0)
    return absl::ResourceExhaustedError(absl::StrCat("tensorboard: writing ", path_, " failed"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::unique_ptr<Monitor>>> openMonitors(const plan::Training &t,
                                                                  bool root) {
  std::vector<std::unique_ptr<Monitor>> monitors;
  if (!root) return monitors;
  if (t.csv_monitor().enabled()) {
    DS_ASSIGN_OR_RETURN(std::unique_ptr<CsvMonitor> m, CsvMonitor::open(t.csv_monitor()));
    monitors.push_back(std::move(m));
  }
  if (t.tensorboard().enabled()) {
    DS_ASSIGN_OR_RETURN(std::unique_ptr<TensorBoardMonitor> m,
                        TensorBoardMonitor::open(t.tensorboard()));
    monitors.push_back(std::move(m));
  }
  return monitors;
}

} // namespace ds::rt
