#include "runtime/train/Monitor.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

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

absl::StatusOr<std::unique_ptr<CsvMonitor>> CsvMonitor::open(const plan::CsvMonitor &config) {
  std::unique_ptr<CsvMonitor> m(new CsvMonitor());
  // os.path.join(output_path, job_name): an empty output path is relative.
  m->dir_ = config.output_path().empty() ? config.job_name()
                                          : config.output_path() + "/" + config.job_name();
  std::error_code ec;
  std::filesystem::create_directories(m->dir_, ec);
  if (ec)
    return absl::PermissionDeniedError(
        absl::StrCat("csv_monitor: cannot create ", m->dir_, ": ", ec.message()));
  return m;
}

absl::Status CsvMonitor::write(const std::vector<MonitorEvent> &events) {
  for (const MonitorEvent &e : events) {
    std::string file = absl::StrReplaceAll(e.name, {{"/", "_"}, {" ", "_"}});
    std::string header = e.name.substr(e.name.rfind('/') == std::string::npos
                                           ? 0
                                           : e.name.rfind('/') + 1);
    std::string path = dir_ + "/" + file + ".csv";
    std::FILE *f = std::fopen(path.c_str(), "a");
    if (!f)
      return absl::PermissionDeniedError(
          absl::StrCat("csv_monitor: cannot write ", path, ": ", std::strerror(errno)));
    std::string text;
    if (started_.insert(file).second) absl::StrAppend(&text, "step,", header, "\r\n");
    // Python's csv writer ends rows with \r\n.
    absl::StrAppend(&text, e.step, ",", pythonFloat(e.value), "\r\n");
    bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok) return absl::ResourceExhaustedError(absl::StrCat("csv_monitor: writing ", path, " failed"));
  }
  return absl::OkStatus();
}

} // namespace ds::rt
