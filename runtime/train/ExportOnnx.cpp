#include "runtime/train/ExportOnnx.h"

#include <cstdio>
#include <fstream>

#include <onnx/onnx_pb.h>

namespace ds::rt {

absl::Status exportOnnx(Session &session, const std::string &path) {
  const ds::plan::Plan &p = session.plan().plan();
  if (p.onnx_graph().empty() || !p.has_training())
    return absl::InvalidArgumentError(
        "this plan carries no ONNX graph to export (compile a training plan from an .onnx model)");
  if (p.training().zero_stage() >= 3 && p.world_size() > 1)
    return absl::UnimplementedError(
        "ZeRO-3 keeps one block of every parameter per rank: exporting needs the blocks "
        "consolidated (DeepSpeed's zero_to_fp32), which ds does not do yet");
  onnx::ModelProto model;
  if (!model.ParseFromString(p.onnx_graph()))
    return absl::DataLossError("the plan's ONNX graph does not parse");
  for (const auto &b : p.training().export_bindings()) {
    onnx::TensorProto *init = nullptr;
    for (auto &t : *model.mutable_graph()->mutable_initializer())
      if (t.name() == b.initializer()) init = &t;
    if (!init)
      return absl::DataLossError(absl::StrCat("initializer '", b.initializer(),
                                              "' is missing from the plan's ONNX graph"));
    DS_ASSIGN_OR_RETURN(HostArray a, session.readState(b.state()));
    if (a.dtype != ds::plan::F32 || init->data_type() != onnx::TensorProto_DataType_FLOAT)
      return absl::UnimplementedError(absl::StrCat("exporting '", b.initializer(),
                                                   "': only float32 weights are exported"));
    std::vector<int64_t> dims(init->dims().begin(), init->dims().end());
    std::string bytes(reinterpret_cast<const char *>(a.data.data()), a.data.size());
    if (b.transpose()) {
      if (a.shape.size() != 2 || dims.size() != 2 || dims[0] != a.shape[1] || dims[1] != a.shape[0])
        return absl::DataLossError(absl::StrCat("state '", b.state(), "' is not the transpose of '",
                                                b.initializer(), "'"));
      int64_t r = a.shape[0], c = a.shape[1];
      const float *src = reinterpret_cast<const float *>(a.data.data());
      std::vector<float> t(static_cast<size_t>(r * c));
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) t[j * r + i] = src[i * c + j];
      bytes.assign(reinterpret_cast<const char *>(t.data()), t.size() * sizeof(float));
    } else if (dims != a.shape) {
      return absl::DataLossError(absl::StrCat("state '", b.state(), "' does not have the shape of '",
                                              b.initializer(), "'"));
    }
    init->clear_float_data();
    init->clear_external_data();
    init->set_data_location(onnx::TensorProto_DataLocation_DEFAULT);
    init->set_raw_data(bytes);
  }
  std::string out;
  if (!model.SerializeToString(&out))
    return absl::InternalError("the exported model does not serialize (over 2 GiB?)");
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f) return absl::InternalError(absl::StrCat("writing ", tmp, " failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  return absl::OkStatus();
}

} // namespace ds::rt
