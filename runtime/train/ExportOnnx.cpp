#include "runtime/train/ExportOnnx.h"
#include "runtime/io/Files.h"
#include "runtime/plan/StateLayout.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <fstream>

#include <onnx/onnx_pb.h>
#include <filesystem>
#include <set>

namespace ds::rt {
namespace {

absl::StatusOr<onnx::ModelProto> sourceModel(const ds::plan::Plan &p) {
  if (p.onnx_graph().empty() || !p.has_training())
    return absl::InvalidArgumentError(
        "this plan carries no ONNX graph to export (compile a training plan from an .onnx model)");
  onnx::ModelProto model;
  if (!model.ParseFromString(p.onnx_graph()))
    return absl::DataLossError("the plan's ONNX graph does not parse");
  return model;
}

} // namespace

absl::StatusOr<std::vector<std::pair<std::string, HostArray>>>
trainedInitializers(const ds::plan::Plan &p, const StateReader &state) {
  DS_ASSIGN_OR_RETURN(onnx::ModelProto model, sourceModel(p));
  // Each initializer's trained value: its state, or its parts' joined.
  struct Trained {
    bool transpose = false;
    std::vector<std::pair<int32_t, HostArray>> parts;
  };
  std::vector<std::string> order;
  std::map<std::string, Trained> trained;
  for (const auto &b : p.training().export_bindings()) {
    auto [it, fresh] = trained.try_emplace(b.initializer());
    if (fresh) order.push_back(b.initializer());
    else if (!b.has_part())
      return absl::DataLossError(absl::StrCat("initializer '", b.initializer(),
                                              "' is bound to two states"));
    it->second.transpose = b.transpose();
    DS_ASSIGN_OR_RETURN(HostArray a, state(b.state()));
    it->second.parts.emplace_back(b.has_part() ? b.part() : 0, std::move(a));
  }
  std::vector<std::pair<std::string, HostArray>> out;
  for (const std::string &name : order) {
    Trained &t = trained[name];
    const onnx::TensorProto *init = nullptr;
    for (const auto &x : model.graph().initializer())
      if (x.name() == name) init = &x;
    if (!init)
      return absl::DataLossError(absl::StrCat("initializer '", name,
                                              "' is missing from the plan's ONNX graph"));
    HostArray a;
    if (t.parts.size() == 1) {
      a = std::move(t.parts[0].second);
    } else {
      std::sort(t.parts.begin(), t.parts.end(),
                [](const auto &x, const auto &y) { return x.first < y.first; });
      std::vector<HostArray> parts;
      for (size_t i = 0; i < t.parts.size(); ++i) {
        if (t.parts[i].first != static_cast<int32_t>(i))
          return absl::DataLossError(absl::StrCat("the parts of '", name,
                                                  "' are not numbered 0 to ", t.parts.size() - 1));
        parts.push_back(std::move(t.parts[i].second));
      }
      DS_ASSIGN_OR_RETURN(a, joinLastAxis(parts, name));
    }
    const std::string what = absl::StrCat("the trained value of '", name, "'");
    if (a.dtype != ds::plan::F32 || init->data_type() != onnx::TensorProto_DataType_FLOAT)
      return absl::UnimplementedError(absl::StrCat("exporting '", name,
                                                   "': only float32 weights are exported"));
    std::vector<int64_t> dims(init->dims().begin(), init->dims().end());
    if (t.transpose) {
      if (a.shape.size() != 2 || dims.size() != 2 || dims[0] != a.shape[1] || dims[1] != a.shape[0])
        return absl::DataLossError(absl::StrCat(what, " is not the transpose of '", name, "'"));
      int64_t r = a.shape[0], c = a.shape[1];
      const float *src = reinterpret_cast<const float *>(a.data.data());
      std::vector<uint8_t> tr(a.data.size());
      float *dst = reinterpret_cast<float *>(tr.data());
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) dst[j * r + i] = src[i * c + j];
      a.data = std::move(tr);
      a.shape = dims;
    } else if (dims != a.shape) {
      return absl::DataLossError(absl::StrCat(what, " does not have the shape of '", name, "'"));
    }
    out.emplace_back(name, std::move(a));
  }
  return out;
}

/// The directory of `path`, resolved (empty when it does not exist).
static std::string realDir(const std::string &path) {
  std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos
                                       ? 0
                                       : path.find_last_of('/'));
  if (dir.empty()) dir = ".";
  char buf[PATH_MAX];
  return ::realpath(dir.c_str(), buf) ? std::string(buf) : std::string();
}

absl::Status exportOnnx(const ds::plan::Plan &p, const StateReader &state, const std::string &path) {
  DS_ASSIGN_OR_RETURN(onnx::ModelProto model, sourceModel(p));
  DS_ASSIGN_OR_RETURN(auto weights, trainedInitializers(p, state));
  // Untrained initializers the source keeps in external data stay where
  // they are, named relative to the source model: the export must sit in
  // the source's directory, or its references would point at nothing (or
  // at another file of the same name).
  std::set<std::string> trained;
  for (const auto &[name, a] : weights) trained.insert(name);
  int external = 0;
  for (const auto &init : model.graph().initializer())
    if (!trained.count(init.name()) &&
        init.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
      ++external;
  if (external > 0) {
    std::string from = realDir(p.source()), to = realDir(path);
    if (from.empty() || from != to)
      return absl::InvalidArgumentError(absl::StrCat(
          "--export-onnx ", path, ": ", external, " untrained initializers of ", p.source(),
          " are external data named relative to it; export into the same directory (",
          from.empty() ? "its directory is not found from here" : from, ")"));
  }
  for (auto &[name, a] : weights)
    for (auto &init : *model.mutable_graph()->mutable_initializer()) {
      if (init.name() != name) continue;
      init.clear_float_data();
      init.clear_external_data();
      init.set_data_location(onnx::TensorProto_DataLocation_DEFAULT);
      init.set_raw_data(std::string(reinterpret_cast<const char *>(a.data.data()), a.data.size()));
    }
  std::string out;
  if (!model.SerializeToString(&out))
    return absl::InternalError("the exported model does not serialize (over 2 GiB?)");
  return replaceFile(path, out.data(), out.size());
}

std::vector<std::string> sourceModelFiles(const ds::plan::Plan &p) {
  std::vector<std::string> files;
  if (p.source().empty()) return files;
  std::error_code ec;
  if (std::filesystem::exists(p.source(), ec)) files.push_back(p.source());
  // The locations as the source file names them (the plan's own copy of
  // the graph holds the values inline); a binary model only, read as
  // protobuf without its external data.
  const std::filesystem::path dir = std::filesystem::path(p.source()).parent_path();
  std::set<std::string> seen;
  auto collect = [&](const onnx::ModelProto &model) {
    for (const auto &init : model.graph().initializer())
      for (const auto &kv : init.external_data())
        if (kv.key() == "location" && seen.insert(kv.value()).second &&
            std::filesystem::exists(dir / kv.value(), ec))
          files.push_back((dir / kv.value()).string());
  };
  onnx::ModelProto model;
  if (!p.onnx_graph().empty() && model.ParseFromString(p.onnx_graph())) collect(model);
  if (!files.empty() && std::filesystem::is_regular_file(p.source(), ec)) {
    std::ifstream in(p.source(), std::ios::binary);
    onnx::ModelProto source;
    if (in && source.ParseFromIstream(&in)) collect(source);
  }
  return files;
}

absl::Status exportOnnx(Session &session, const std::string &path) {
  const ds::plan::Plan &p = session.plan().plan();
  // ZeRO-3 parameters, and from stage 1 on the fp32 masters of mixed
  // precision, are one block per rank.
  bool partitioned = false;
  for (const auto &b : p.buffers()) {
    if (b.kind() != ds::plan::Buffer::STATE || (b.partition_numel() == 0 && b.splits_size() == 0))
      continue;
    for (const auto &e : p.training().export_bindings()) partitioned |= e.state() == b.io_name();
  }
  if (p.has_training() && partitioned && session.comm().size() > 1)
    return absl::InvalidArgumentError(
        "the ranks hold one block of each trained weight (tensor parallelism's slices, ZeRO-3, "
        "or mixed precision's fp32 masters from stage 1): export from a checkpoint, in one "
        "process (ds-run PLAN "
        "--checkpoint-dir DIR --export-onnx OUT.onnx, without mpirun)");
  return exportOnnx(p, [&](const std::string &n) { return session.readState(n); }, path);
}

} // namespace ds::rt
