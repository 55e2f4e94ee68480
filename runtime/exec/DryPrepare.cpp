#include "runtime/exec/DryPrepare.h"

#include <sys/mman.h>

#include "absl/strings/str_cat.h"
#include "runtime/exec/Collectives.h"
#include "runtime/plan/DType.h"

namespace ds::rt {

absl::Status dryPrepare(const plan::Plan &p, Backend &backend) {
  if (p.world_size() > 1) return absl::OkStatus();
  // Where each buffer lives: the arenas' offsets, then a slot per other
  // buffer, 64-byte aligned, in one reservation.
  auto align = [](uint64_t v) { return (v + 63) / 64 * 64; };
  constexpr uint64_t kMaxReserve = uint64_t(1) << 46;
  uint64_t total = align(p.arena_bytes()) + align(p.host_arena_bytes());
  std::vector<uint64_t> at(p.buffers_size(), 0);
  // (A plan the structural validator would refuse is its to name.)
  for (int i = 0; i < p.buffers_size(); ++i)
    if (p.buffers(i).id() != static_cast<uint32_t>(i) || p.buffers(i).size_bytes() > kMaxReserve)
      return absl::OkStatus();
  for (const plan::Program &prog : p.programs())
    for (const plan::Step &step : prog.steps())
      for (const auto *ids : {&step.inputs(), &step.outputs()})
        for (uint32_t id : *ids)
          if (id >= static_cast<uint32_t>(p.buffers_size())) return absl::OkStatus();
  for (const plan::Buffer &b : p.buffers()) {
    if (b.space() == plan::NVME) return absl::OkStatus(); // a drive's, ds-run's to check
    if (b.kind() == plan::Buffer::ARENA) {
      at[b.id()] = (b.space() == plan::HOST ? align(p.arena_bytes()) : 0) + b.offset();
      continue;
    }
    at[b.id()] = total;
    total += align(b.size_bytes());
    if (total > kMaxReserve) return absl::OkStatus();
  }
  total = std::max<uint64_t>(total, 64);
  void *base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return absl::OkStatus(); // under an address-space limit: ds-run checks
  std::vector<TensorView> views(p.buffers_size());
  for (const plan::Buffer &b : p.buffers()) {
    TensorView &v = views[b.id()];
    v.dtype = b.dtype();
    v.shape.assign(b.shape().begin(), b.shape().end());
    v.numel = dtypeSize(b.dtype()) ? static_cast<int64_t>(b.size_bytes() / dtypeSize(b.dtype())) : 0;
    v.data = static_cast<uint8_t *>(base) + at[b.id()];
  }
  absl::Status st;
  for (const plan::Program &prog : p.programs()) {
    for (const plan::Step &step : prog.steps()) {
      if (isCollective(step.kernel())) continue;
      std::vector<TensorView> ins, outs;
      for (uint32_t id : step.inputs()) ins.push_back(views[id]);
      for (uint32_t id : step.outputs()) outs.push_back(views[id]);
      plan::Step dry = step;
      dry.mutable_attrs()->erase("constant_weight"); // packing reads the weights
      absl::StatusOr<PreparedStep> prepared = backend.prepare(dry, ins, outs);
      if (!prepared.ok()) {
        st = absl::Status(prepared.status().code(), absl::StrCat("program '", prog.name(), "': ",
                                                                 prepared.status().message()));
        break;
      }
    }
    if (!st.ok()) break;
  }
  ::munmap(base, total);
  return st;
}

} // namespace ds::rt
