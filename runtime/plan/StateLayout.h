//===- StateLayout.h - where a state tensor's elements live across ranks -===//
//
// A STATE buffer of a multi-rank plan is, on each rank, a part of one whole
// tensor: tensor parallelism's slice (Buffer.splits over mesh axes), then
// ZeRO's block of that slice (partition_numel, over partition_axis). A
// checkpoint records every state's layout and the mesh it was saved on, so
// it can be put back together whole (consolidation, DeepSpeed's
// zero_to_fp32) and cut again for another mesh (Universal Checkpointing,
// done at load time).
//
//===----------------------------------------------------------------------===//
#ifndef DS_RUNTIME_TRAIN_STATELAYOUT_H
#define DS_RUNTIME_TRAIN_STATELAYOUT_H

#include "runtime/backend/Tensor.h"
#include "runtime/proto/plan.pb.h"

#include "absl/status/statusor.h"

#include <functional>
#include <optional>

namespace ds::rt {

/// The whole tensor's shape of state buffer `b`.
std::vector<int64_t> wholeShapeOf(const ds::plan::Buffer &b);

/// ZeRO: which block of its (slice of the) state rank `rank` of `ranks`
/// holds: its coordinate on the partition axis (the rank without one).
int64_t blockIndexOf(const ds::plan::Buffer &b, const ds::plan::Mesh &mesh, int64_t ranks,
                     int64_t rank);

/// Whether `b` differs between the ranks of `mesh` (sliced or blocked).
bool differsPerRank(const ds::plan::Buffer &b);

/// State buffer `b` whole, from the parts `ranks` ranks of `mesh` held
/// (`part(r)`: rank r's array, or null when missing). `where` names the
/// checkpoint in errors.
absl::StatusOr<HostArray>
assembleWhole(const ds::plan::Buffer &b, const ds::plan::Mesh &mesh, int64_t ranks,
              const std::function<const HostArray *(int64_t)> &part, const std::string &where);

/// Rank `rank`'s part of state buffer `b` (laid out over `mesh` of `ranks`
/// ranks), cut from the whole tensor.
absl::StatusOr<HostArray> rankPart(const ds::plan::Buffer &b, const ds::plan::Mesh &mesh,
                                   int64_t ranks, int64_t rank, const HostArray &whole);

/// Tensors of one shape but the last dimension joined along it, in order:
/// the fused projection (QKV) tensor parallelism trains as parts. `what`
/// names it in errors.
absl::StatusOr<HostArray> joinLastAxis(const std::vector<HostArray> &parts,
                                       const std::string &what);

/// Columns [begin, begin + size) of the last dimension of `a`: part of a
/// fused projection.
absl::StatusOr<HostArray> lastAxisBlock(const HostArray &a, int64_t begin, int64_t size,
                                        const std::string &what);

/// A state name of tensor parallelism's part `index` of a fused projection
/// ("param:W#1" -> "param:W", 1); nullopt for other names.
std::optional<std::pair<std::string, int64_t>> splitPartName(const std::string &name);

/// Whether two layouts of one state put the same elements on every rank.
bool sameLayout(const ds::plan::Buffer &a, const ds::plan::Buffer &b);
bool sameMesh(const ds::plan::Mesh &a, const ds::plan::Mesh &b);

/// What a checkpoint records of `plan`'s state: the mesh and each STATE
/// buffer's layout (no bytes).
void recordLayouts(const ds::plan::Plan &plan, ds::plan::CheckpointMeta *meta);

} // namespace ds::rt

#endif
