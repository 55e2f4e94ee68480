#include "runtime/train/PlanIdentity.h"

#include "absl/strings/str_cat.h"
#include "runtime/comm/Comm.h"
#include "runtime/plan/StateLayout.h"
#include <map>

#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

namespace ds::rt {
namespace {

/// FNV-1a, 64 bits: stable across builds and machines (std::hash is not).
struct Fnv {
  uint64_t h = 1469598103934665603ULL;
  void add(const void *data, size_t n) {
    const auto *p = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  }
  void add(const std::string &s) {
    uint64_t n = s.size();
    add(&n, sizeof(n));
    add(s.data(), s.size());
  }
  void add(int64_t v) { add(&v, sizeof(v)); }
};

} // namespace

uint64_t planHash(const ds::plan::Plan &plan) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&coded);
  }
  Fnv f;
  f.add(bytes);
  return f.h;
}

uint64_t modelHash(const ds::plan::Plan &plan) {
  Fnv f;
  f.add(static_cast<int64_t>(plan.model_fingerprint()));
  f.add(plan.onnx_graph());
  // Each trained tensor whole, by name: tensor parallelism's slices and the
  // parts it trains a fused projection as ("param:W#0", ...) count as the
  // tensor they are of, so every tp degree, world size and stage agree.
  std::map<std::string, std::pair<int64_t, std::vector<int64_t>>> trained;
  for (const auto &b : plan.buffers()) {
    if (b.kind() != ds::plan::Buffer::STATE) continue;
    std::string n = b.io_name();
    if (n.rfind("param:", 0) != 0 && n.rfind("master:", 0) != 0) continue;
    std::vector<int64_t> shape = wholeShapeOf(b);
    if (auto part = splitPartName(n); part && !shape.empty()) {
      auto [it, fresh] = trained.try_emplace(part->first, static_cast<int64_t>(b.dtype()), shape);
      if (!fresh && !it->second.second.empty()) it->second.second.back() += shape.back();
      continue;
    }
    trained[n] = {static_cast<int64_t>(b.dtype()), shape};
  }
  for (const auto &[n, t] : trained) {
    f.add(n);
    f.add(t.first);
    for (int64_t d : t.second) f.add(d);
  }
  return f.h;
}

uint64_t legacyModelHash(const ds::plan::Plan &plan) {
  Fnv f;
  f.add(static_cast<int64_t>(plan.model_fingerprint()));
  f.add(plan.onnx_graph());
  for (const auto &b : plan.buffers()) {
    if (b.kind() != ds::plan::Buffer::STATE) continue;
    const std::string &n = b.io_name();
    if (n.rfind("param:", 0) != 0 && n.rfind("master:", 0) != 0) continue;
    f.add(n);
    f.add(static_cast<int64_t>(b.dtype()));
    if (b.partition_numel() > 0)
      for (int64_t d : b.partition_shape()) f.add(d);
    else
      for (int64_t d : b.shape()) f.add(d);
  }
  return f.h;
}

uint64_t fnv1a(const void *data, size_t n, uint64_t h) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

absl::Status agreeAcrossRanks(Comm &comm, uint64_t mine, const std::string &what,
                              const std::string &detail) {
  if (comm.size() == 1) return absl::OkStatus();
  // Two 32-bit halves: equal min and max of each mean every rank agrees.
  int64_t lo[2] = {static_cast<int64_t>(mine >> 32), static_cast<int64_t>(mine & 0xffffffffu)};
  int64_t hi[2] = {lo[0], lo[1]};
  DS_RETURN_IF_ERROR(comm.allReduce(lo, 2, ds::plan::I64, ReduceOp::Min));
  DS_RETURN_IF_ERROR(comm.allReduce(hi, 2, ds::plan::I64, ReduceOp::Max));
  if (lo[0] != hi[0] || lo[1] != hi[1])
    return absl::FailedPreconditionError(
        absl::StrCat("the ranks run ", what, " (rank ", comm.rank(), ": ", detail, ")"));
  return absl::OkStatus();
}

} // namespace ds::rt
