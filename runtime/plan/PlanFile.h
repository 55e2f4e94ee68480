// The .dsplan container: header, serialized ds.plan.Plan, weight section.
//
//   offset 0   magic "DSPLAN\x1a\n" (8 bytes; \x1a\n catch text-mode mangling)
//          8   u32 format_version (kFormatVersion)   12  u32 header_bytes (64)
//         16   u64 proto_offset (64)                 24  u64 proto_bytes
//         32   u32 proto_crc32                       36  u32 reserved (0)
//         40   u64 weights_offset (64-aligned)       48  u64 weights_bytes
//         56   u64 reserved (0)
//   [proto bytes] [zero padding] [weights: each weight 64-byte aligned]
//
// All integers little-endian. The weight section is mapped, not copied, so a
// loaded plan's weights are zero-copy views into the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/plan/DType.h"
#include "runtime/plan/Status.h"
#include "runtime/proto/plan.pb.h"

namespace ds::rt {

constexpr char kPlanMagic[8] = {'D', 'S', 'P', 'L', 'A', 'N', '\x1a', '\n'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kSchemaVersion = 1;
constexpr uint64_t kWeightAlignment = 64;
constexpr uint64_t kArenaAlignment = 64;

/// Builds a plan file: the compiler adds weights, fills in the message, then
/// writes. Weight offsets and checksums are computed here, not by callers.
class PlanWriter {
public:
  plan::Plan &plan() { return plan_; }
  /// Appends a copy of `bytes` to the weight section at the next aligned
  /// offset; fills the buffer's offset, size and crc32.
  void addWeight(plan::Buffer &buffer, const void *bytes, uint64_t size);
  /// The same without a copy: `bytes` is read by write(), so it must stay
  /// valid until then (weights held by the compiler's IR). This keeps the
  /// compiler's peak memory near one copy of the model.
  void addWeightView(plan::Buffer &buffer, const void *bytes, uint64_t size);
  /// Appends one rank's shard of a buffer (call once per rank, in rank
  /// order); rank 0's also fills offset, size and crc32.
  void addWeightShard(plan::Buffer &buffer, const void *bytes, uint64_t size);
  /// The same without a copy (see addWeightView).
  void addWeightShardView(plan::Buffer &buffer, const void *bytes, uint64_t size);
  /// Writes atomically (to `path.tmp`, then rename), streaming the weights
  /// from where they are rather than assembling the file in memory.
  absl::Status write(const std::string &path);

private:
  struct Segment {
    uint64_t offset;
    const uint8_t *data;
    uint64_t size;
  };
  uint64_t place(plan::Buffer &buffer, const void *bytes, uint64_t size);
  void shard(plan::Buffer &buffer, const void *bytes, uint64_t size, bool copy);
  plan::Plan plan_;
  std::vector<Segment> segments_;
  std::vector<std::unique_ptr<uint8_t[]>> copies_;
  uint64_t weightBytes_ = 0;
};

/// The container bytes of `p` (schema version and weight size filled in)
/// with `weights` as its weight section.
std::vector<uint8_t> serializePlanFile(plan::Plan p, const std::vector<uint8_t> &weights);

/// zlib CRC-32, the checksum of plan messages and weights.
uint32_t planCrc32(const void *data, uint64_t size);

/// A loaded, validated plan. Weights point into a read-only mapping.
class LoadedPlan {
public:
  ~LoadedPlan();
  LoadedPlan(const LoadedPlan &) = delete;
  LoadedPlan &operator=(const LoadedPlan &) = delete;

  const plan::Plan &plan() const { return plan_; }
  const std::string &path() const { return path_; }
  /// Bytes of a WEIGHT buffer for this process's rank (already bounds- and
  /// checksum-checked).
  const uint8_t *weightData(const plan::Buffer &b) const {
    return weights_ + (b.rank_shards_size() ? b.rank_shards(rank_).offset() : b.offset());
  }
  int rank() const { return rank_; }
  /// Weight bytes this rank reads (its shards and the replicated weights).
  uint64_t rankWeightBytes() const;
  const plan::Program *findProgram(const std::string &name) const;

  /// Opens, maps and validates `path`. Every failure names the file and what
  /// is wrong with it.
  /// `rank` selects the weight shards of a multi-rank plan; only those (and
  /// replicated weights) are checksummed and touched.
  static absl::StatusOr<std::unique_ptr<LoadedPlan>> open(const std::string &path, int rank = 0);
  /// Same checks on bytes already in memory (used by the fuzzer and tests).
  static absl::StatusOr<std::unique_ptr<LoadedPlan>>
  fromBytes(std::vector<uint8_t> bytes, const std::string &name);

private:
  LoadedPlan() = default;
  absl::Status parse(const uint8_t *data, uint64_t size);
  absl::Status validate();
  int rank_ = 0;

  std::string path_;
  plan::Plan plan_;
  void *mapping_ = nullptr;
  uint64_t mappingSize_ = 0;
  std::vector<uint8_t> owned_;
  const uint8_t *weights_ = nullptr;
  uint64_t weightsSize_ = 0;
};

/// Structural checks that need nothing but the message: ids, kinds, sizes,
/// arena bounds, and that arena buffers sharing bytes are never live at once.
absl::Status validatePlanStructure(const plan::Plan &p, uint64_t weightBytes);

/// Whether `s` is valid UTF-8 (what protobuf requires of a `string` field).
bool isUtf8(const std::string &s);
/// `s` with the bytes of invalid UTF-8 written as \xNN: for informational
/// strings (locations, the source path) that must not make a plan unreadable.
std::string utf8Escaped(const std::string &s);

/// Human-readable listing of a plan (ds-run --dump).
std::string dumpPlan(const plan::Plan &p);

/// Bytes one rank of `p` holds per memory space (the arenas are static, so
/// this is also the peak): device = arena + weights + device state + inputs
/// and outputs; host = host arena + offloaded state (+ host weights).
struct SpaceBytes {
  uint64_t device = 0, host = 0;
  uint64_t deviceArena = 0, hostArena = 0, deviceState = 0, hostState = 0;
  uint64_t nvme = 0; // state swapped to NVMe (ZeRO-Infinity)
};
SpaceBytes spaceBytes(const plan::Plan &p);
/// The error for a plan whose device bytes exceed `budget` (0: none), or OK.
absl::Status checkDeviceBudget(const SpaceBytes &s, uint64_t budget);

} // namespace ds::rt
