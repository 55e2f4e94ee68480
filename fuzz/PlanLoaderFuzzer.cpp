// Fuzzes the plan loader and, for plans it accepts, binding and running
// every program on the CPU backend with zero inputs: a plan that loads must
// never make a kernel read or write out of bounds.
#include <cstddef>
#include <cstdint>
#include <map>

#include "runtime/backend/AllBackends.h"
#include "runtime/backend/BackendRegistry.h"
#include "runtime/exec/Session.h"
#include "runtime/plan/PlanFile.h"

namespace plan = ds::plan;
using namespace ds::rt;

namespace {
/// Inputs starting with a 0 byte are a bare Plan message: the target wraps
/// it in a container with zero weights and correct checksums, so mutations
/// reach the structural checks and the kernels instead of dying at a CRC.
/// Any other input is a whole file (the container checks themselves).
std::vector<uint8_t> toFile(const uint8_t *data, size_t size) {
  if (size == 0 || data[0] != 0) return std::vector<uint8_t>(data, data + size);
  plan::Plan p;
  if (!p.ParseFromArray(data + 1, static_cast<int>(size - 1))) return {};
  std::vector<uint8_t> weights(std::min<uint64_t>(p.weight_bytes(), 1u << 20), 0);
  for (auto &b : *p.mutable_buffers())
    if (b.kind() == plan::Buffer::WEIGHT && b.offset() <= weights.size() &&
        b.size_bytes() <= weights.size() - b.offset())
      b.set_crc32(planCrc32(weights.data() + b.offset(), b.size_bytes()));
  return serializePlanFile(p, weights);
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto loaded = LoadedPlan::fromBytes(toFile(data, size), "fuzz");
  if (!loaded.ok()) return 0;
  const plan::Plan &p = (*loaded)->plan();
  // Keep each input cheap: plans asking for more than 64 MiB are valid but
  // not interesting to run here.
  // (Everything binding allocates: both arenas, inputs, outputs and state;
  // each at most 2^62 by the validator, so a running sum checked at every
  // step cannot wrap.)
  constexpr uint64_t kMax = 64u << 20;
  uint64_t bytes = p.arena_bytes();
  if (bytes > kMax || (bytes += p.host_arena_bytes()) > kMax) return 0;
  for (const auto &b : p.buffers())
    if ((b.kind() == plan::Buffer::INPUT || b.kind() == plan::Buffer::OUTPUT ||
         b.kind() == plan::Buffer::STATE) &&
        (bytes += b.size_bytes()) > kMax)
      return 0;
  BackendOptions opts;
  opts.threads = 1;
  if (!registerAllBackends().ok()) return 0;
  auto backend = createBackend("cpu", opts);
  if (!backend.ok()) return 0;
  auto session = Session::create(**loaded, **backend);
  if (!session.ok()) return 0;
  for (const auto &prog : p.programs()) {
    std::map<std::string, HostArray> inputs;
    for (uint32_t id : prog.inputs()) {
      const auto &b = p.buffers(id);
      HostArray a;
      a.dtype = b.dtype();
      a.shape.assign(b.shape().begin(), b.shape().end());
      a.data.assign(b.size_bytes(), 0);
      inputs[b.io_name()] = std::move(a);
    }
    (void)(*session)->run(prog.name(), inputs);
  }
  return 0;
}
