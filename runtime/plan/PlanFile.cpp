#include "runtime/plan/PlanFile.h"
#include "runtime/plan/TempPath.h"
#include "runtime/plan/NpzNames.h"
#include "absl/strings/escaping.h"

#include <cmath>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <map>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <zlib.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ds::rt {
namespace {

constexpr uint32_t kHeaderBytes = 64;

uint32_t crc32Of(const void *data, uint64_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto *p = static_cast<const Bytef *>(data);
  // zlib takes uInt lengths; feed large buffers in chunks.
  while (size > 0) {
    uInt chunk = static_cast<uInt>(std::min<uint64_t>(size, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

template <typename T> void putLE(uint8_t *dst, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    dst[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}
template <typename T> T getLE(const uint8_t *src) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<uint64_t>(src[i]) << (8 * i);
  return static_cast<T>(v);
}

uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

absl::Status writeAll(int fd, const void *data, uint64_t size,
                      const std::string &path) {
  const auto *p = static_cast<const uint8_t *>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, std::min<uint64_t>(size, 1u << 30));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return absl::InternalError(
          absl::StrCat("writing ", path, ": ", std::strerror(errno)));
    }
    p += n;
    size -= static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

} // namespace

uint64_t PlanWriter::place(plan::Buffer &buffer, const void *bytes, uint64_t size) {
  uint64_t offset = alignUp(weightBytes_, kWeightAlignment);
  segments_.push_back({offset, static_cast<const uint8_t *>(bytes), size});
  weightBytes_ = offset + size;
  buffer.set_offset(offset);
  buffer.set_size_bytes(size);
  buffer.set_crc32(crc32Of(bytes, size));
  return offset;
}

void PlanWriter::addWeightView(plan::Buffer &buffer, const void *bytes, uint64_t size) {
  place(buffer, bytes, size);
}

void PlanWriter::addWeight(plan::Buffer &buffer, const void *bytes, uint64_t size) {
  copies_.emplace_back(new uint8_t[std::max<uint64_t>(size, 1)]);
  if (size) std::memcpy(copies_.back().get(), bytes, size);
  place(buffer, copies_.back().get(), size);
}

void PlanWriter::addWeightShard(plan::Buffer &buffer, const void *bytes, uint64_t size) {
  shard(buffer, bytes, size, /*copy=*/true);
}

void PlanWriter::addWeightShardView(plan::Buffer &buffer, const void *bytes, uint64_t size) {
  shard(buffer, bytes, size, /*copy=*/false);
}

void PlanWriter::shard(plan::Buffer &buffer, const void *bytes, uint64_t size, bool copy) {
  bool first = buffer.rank_shards_size() == 0;
  uint64_t before = buffer.offset();
  uint32_t crc = buffer.crc32();
  if (copy) addWeight(buffer, bytes, size);
  else addWeightView(buffer, bytes, size);
  plan::WeightShard *s = buffer.add_rank_shards();
  s->set_offset(buffer.offset());
  s->set_crc32(buffer.crc32());
  if (!first) { // offset and crc32 keep naming rank 0's shard
    buffer.set_offset(before);
    buffer.set_crc32(crc);
  }
}

uint32_t planCrc32(const void *data, uint64_t size) { return crc32Of(data, size); }

namespace {
/// Header, message and the zero padding up to the weight section.
std::vector<uint8_t> planPrefix(plan::Plan &p, uint64_t weightBytes) {
  p.set_schema_version(kSchemaVersion);
  p.set_weight_bytes(weightBytes);
  // Deterministic: protobuf maps (step attributes) otherwise serialize in
  // hash order, and the same model would give different plan bytes.
  std::string proto;
  {
    google::protobuf::io::StringOutputStream stream(&proto);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    p.SerializeToCodedStream(&coded);
  }
  uint64_t weightsOffset = alignUp(kHeaderBytes + proto.size(), kWeightAlignment);
  std::vector<uint8_t> out(weightsOffset, 0);
  std::memcpy(out.data(), kPlanMagic, 8);
  putLE<uint32_t>(out.data() + 8, kFormatVersion);
  putLE<uint32_t>(out.data() + 12, kHeaderBytes);
  putLE<uint64_t>(out.data() + 16, kHeaderBytes);
  putLE<uint64_t>(out.data() + 24, proto.size());
  putLE<uint32_t>(out.data() + 32, crc32Of(proto.data(), proto.size()));
  putLE<uint64_t>(out.data() + 40, weightsOffset);
  putLE<uint64_t>(out.data() + 48, weightBytes);
  std::memcpy(out.data() + kHeaderBytes, proto.data(), proto.size());
  return out;
}
} // namespace

std::vector<uint8_t> serializePlanFile(plan::Plan p, const std::vector<uint8_t> &weights) {
  std::vector<uint8_t> out = planPrefix(p, weights.size());
  out.insert(out.end(), weights.begin(), weights.end());
  return out;
}

absl::Status PlanWriter::write(const std::string &path) {
  if (plan_.ByteSizeLong() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return absl::InvalidArgumentError("plan message is over 2 GiB; too many steps or buffers");
  // The loader's checks, here: never write a plan ds-run would refuse.
  if (absl::Status st = validatePlanStructure(plan_, weightBytes_); !st.ok())
    return absl::Status(st.code(), absl::StrCat("the plan would not load: ", st.message()));
  // Created afresh: whatever another user left at the temporary name (a
  // symlink, a FIFO) is removed, never followed or waited on.
  std::string tmp = tempPathFor(path);
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  std::vector<uint8_t> prefix = planPrefix(plan_, weightBytes_);
  absl::Status st = writeAll(fd, prefix.data(), prefix.size(), tmp);
  static const uint8_t kZeros[kWeightAlignment] = {};
  uint64_t at = 0; // within the weight section
  for (const Segment &seg : segments_) {
    if (!st.ok()) break;
    if (seg.offset > at) st = writeAll(fd, kZeros, seg.offset - at, tmp);
    if (st.ok()) st = writeAll(fd, seg.data, seg.size, tmp);
    at = seg.offset + seg.size;
  }
  if (st.ok() && ::fsync(fd) != 0)
    st = absl::InternalError(absl::StrCat("fsync ", tmp, ": ", std::strerror(errno)));
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = absl::InternalError(absl::StrCat("rename ", tmp, " to ", path, ": ",
                                          std::strerror(errno)));
  if (!st.ok())
    ::unlink(tmp.c_str());
  return st;
}

LoadedPlan::~LoadedPlan() {
  if (mapping_)
    ::munmap(mapping_, mappingSize_);
}

const plan::Program *LoadedPlan::findProgram(const std::string &name) const {
  for (const auto &prog : plan_.programs())
    if (prog.name() == name)
      return &prog;
  return nullptr;
}

absl::StatusOr<std::unique_ptr<LoadedPlan>>
LoadedPlan::open(const std::string &path, int rank) {
  std::unique_ptr<LoadedPlan> lp(new LoadedPlan());
  lp->path_ = path;
  lp->rank_ = rank;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); // a FIFO must not block
  if (fd < 0)
    return absl::NotFoundError(
        absl::StrCat("cannot open plan ", path, ": ", std::strerror(errno)));
  struct stat stbuf;
  if (::fstat(fd, &stbuf) != 0 || !S_ISREG(stbuf.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("plan ", path, " is not a regular file"));
  }
  uint64_t size = static_cast<uint64_t>(stbuf.st_size);
  if (size < kHeaderBytes) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        "plan ", path, " is truncated: ", size, " bytes, less than the ",
        kHeaderBytes, "-byte header"));
  }
  void *m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED)
    return absl::InternalError(
        absl::StrCat("cannot map plan ", path, ": ", std::strerror(errno)));
  lp->mapping_ = m;
  lp->mappingSize_ = size;
  absl::Status st = lp->parse(static_cast<const uint8_t *>(m), size);
  if (!st.ok())
    return absl::Status(st.code(), absl::StrCat("plan ", path, ": ", st.message()));
  return lp;
}

absl::StatusOr<std::unique_ptr<LoadedPlan>>
LoadedPlan::fromBytes(std::vector<uint8_t> bytes, const std::string &name) {
  std::unique_ptr<LoadedPlan> lp(new LoadedPlan());
  lp->path_ = name;
  lp->owned_ = std::move(bytes);
  absl::Status st = lp->parse(lp->owned_.data(), lp->owned_.size());
  if (!st.ok())
    return absl::Status(st.code(), absl::StrCat("plan ", name, ": ", st.message()));
  return lp;
}

absl::Status LoadedPlan::parse(const uint8_t *data, uint64_t size) {
  if (size < kHeaderBytes)
    return absl::InvalidArgumentError(
        absl::StrCat("truncated: ", size, " bytes, smaller than the header"));
  if (std::memcmp(data, kPlanMagic, 8) != 0)
    return absl::InvalidArgumentError("not a ds plan (bad magic)");
  uint32_t version = getLE<uint32_t>(data + 8);
  if (version != kFormatVersion)
    return absl::InvalidArgumentError(
        absl::StrCat("container format version ", version,
                     " is not supported (this ds-run reads version ",
                     kFormatVersion, ")"));
  if (getLE<uint32_t>(data + 12) != kHeaderBytes ||
      getLE<uint64_t>(data + 16) != kHeaderBytes)
    return absl::InvalidArgumentError("corrupt header (header size)");
  uint64_t protoBytes = getLE<uint64_t>(data + 24);
  uint32_t protoCrc = getLE<uint32_t>(data + 32);
  uint64_t weightsOffset = getLE<uint64_t>(data + 40);
  uint64_t weightsBytes = getLE<uint64_t>(data + 48);
  if (protoBytes > static_cast<uint64_t>(std::numeric_limits<int>::max()) ||
      protoBytes > size - kHeaderBytes)
    return absl::InvalidArgumentError(absl::StrCat(
        "truncated or corrupt: plan message of ", protoBytes,
        " bytes does not fit in a file of ", size, " bytes"));
  if (weightsOffset % kWeightAlignment != 0 ||
      weightsOffset < kHeaderBytes + protoBytes || weightsOffset > size ||
      weightsBytes != size - weightsOffset)
    return absl::InvalidArgumentError(absl::StrCat(
        "truncated or corrupt: weight section at ", weightsOffset, " of ",
        weightsBytes, " bytes does not end at the file's end (", size,
        " bytes)"));
  if (crc32Of(data + kHeaderBytes, protoBytes) != protoCrc)
    return absl::DataLossError("plan message checksum mismatch (corrupt file)");

  google::protobuf::io::CodedInputStream in(data + kHeaderBytes,
                                            static_cast<int>(protoBytes));
  in.SetTotalBytesLimit(static_cast<int>(protoBytes));
  if (!plan_.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return absl::InvalidArgumentError("plan message does not parse");
  if (plan_.schema_version() != kSchemaVersion)
    return absl::InvalidArgumentError(absl::StrCat(
        "plan schema version ", plan_.schema_version(),
        " is not supported (this ds-run reads version ", kSchemaVersion, ")"));
  if (plan_.weight_bytes() != weightsBytes)
    return absl::InvalidArgumentError(absl::StrCat(
        "plan says its weights take ", plan_.weight_bytes(),
        " bytes but the file holds ", weightsBytes));
  weights_ = data + weightsOffset;
  weightsSize_ = weightsBytes;
  return validate();
}

static bool hasWeightBytes(const plan::Buffer &b) {
  return b.kind() == plan::Buffer::WEIGHT ||
         (b.kind() == plan::Buffer::STATE && b.state_init() == plan::Buffer::STATE_INIT_WEIGHTS);
}

uint64_t LoadedPlan::rankWeightBytes() const {
  uint64_t total = 0;
  for (const auto &b : plan_.buffers())
    if (hasWeightBytes(b)) total += b.size_bytes();
  return total;
}

absl::Status LoadedPlan::validate() {
  DS_RETURN_IF_ERROR(validatePlanStructure(plan_, weightsSize_));
  uint32_t world = std::max<uint32_t>(1, plan_.world_size());
  if (rank_ < 0 || static_cast<uint32_t>(rank_) >= world)
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, " is outside the plan's world of ", world));
  for (const auto &b : plan_.buffers()) {
    if (!hasWeightBytes(b))
      continue;
    uint32_t want = b.rank_shards_size() ? b.rank_shards(rank_).crc32() : b.crc32();
    if (crc32Of(weightData(b), b.size_bytes()) != want)
      return absl::DataLossError(absl::StrCat(
          "checksum mismatch in weight buffer ", b.id(),
          b.debug_name().empty() ? std::string() : absl::StrCat(" (", b.debug_name(), ")"),
          b.rank_shards_size() ? absl::StrCat(", rank ", rank_, "'s shard") : std::string(),
          ": the weight section is corrupt"));
  }
  return absl::OkStatus();
}

namespace {

/// [offset, offset + size) lies inside [0, limit), without overflowing.
bool fitsIn(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

/// The world size is one ds supports, and a mesh, if given, covers it.
absl::Status checkWorldAndMesh(const plan::Plan &p, uint32_t world) {
  if (p.world_size() > 4096)
    return absl::InvalidArgumentError(absl::StrCat("world size ", p.world_size(),
                                                   " is larger than ds supports (4096)"));
  if (!p.mesh().axes_size()) return absl::OkStatus();
  int64_t product = 1;
  std::set<std::string> axisNames;
  for (const auto &a : p.mesh().axes()) {
    if (a.name().empty() || a.size() < 1 || a.size() > 4096 || !axisNames.insert(a.name()).second)
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh axis '", a.name(), "' of size ", a.size(),
          " is invalid (names must be unique and non-empty, sizes in [1, 4096])"));
    product *= a.size();
    if (product > 4096) break;
  }
  if (product != world)
    return absl::InvalidArgumentError(absl::StrCat("the mesh's axes multiply to ", product,
                                                   " ranks but the world size is ", world));
  return absl::OkStatus();
}

/// Id, element type, memory space, and a byte size that matches the shape.
absl::Status checkBufferType(const plan::Buffer &b, int index, const std::string &what) {
  if (b.id() != static_cast<uint32_t>(index))
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has id ", b.id(), "; ids must equal positions"));
  if (!plan::DType_IsValid(b.dtype()) || dtypeSize(b.dtype()) == 0)
    return absl::InvalidArgumentError(absl::StrCat(what, " has an invalid dtype"));
  if (!plan::MemorySpace_IsValid(b.space()))
    return absl::InvalidArgumentError(absl::StrCat(what, " has an invalid memory space"));
  std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
  auto bytes = checkedByteSize(shape, b.dtype());
  if (!bytes.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", bytes.status().message()));
  if (*bytes != b.size_bytes())
    return absl::InvalidArgumentError(absl::StrCat(
        what, " declares ", b.size_bytes(), " bytes but its shape [", shapeToString(shape),
        "] of ", dtypeName(b.dtype()), " needs ", *bytes));
  return absl::OkStatus();
}

/// Per-rank weight shards: only of weight bytes, one per rank, each inside
/// the weight section.
absl::Status checkRankShards(const plan::Buffer &b, const std::string &what, uint32_t world,
                             uint64_t weightBytes) {
  if (!b.rank_shards_size()) return absl::OkStatus();
  if (!hasWeightBytes(b))
    return absl::InvalidArgumentError(absl::StrCat(what, " has rank shards but no weight bytes"));
  if (static_cast<uint32_t>(b.rank_shards_size()) != world)
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", b.rank_shards_size(), " rank shards for a world of ", world));
  for (const auto &s : b.rank_shards())
    if (!fitsIn(s.offset(), b.size_bytes(), weightBytes) || s.offset() % dtypeSize(b.dtype()) != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": a rank shard at weight offset ", s.offset(), " (", b.size_bytes(),
          " bytes) lies outside the ", weightBytes, "-byte weight section"));
  return absl::OkStatus();
}

/// What the buffer's kind requires: arena and weight bytes in bounds and
/// aligned; state buffers uniquely named (checkpoints key them by name);
/// inputs and outputs named (callers bind them by name).
absl::Status checkBufferKind(const plan::Buffer &b, const std::string &what, uint64_t arenaBytes,
                             uint64_t hostArenaBytes, uint64_t weightBytes,
                             std::set<std::string> &stateNames) {
  // Memory spaces (ZeRO-Offload): intermediates, weights and state live on
  // the device or the host; inputs and outputs are device buffers.
  const bool host = b.space() == plan::HOST;
  // NVMe holds swapped state only (ZeRO-Infinity): a swap file's bytes.
  const bool nvme = b.space() == plan::NVME && b.kind() == plan::Buffer::STATE;
  if (b.space() != plan::DEVICE && !host && !nvme)
    return absl::InvalidArgumentError(absl::StrCat(what, " is in memory space ",
                                                   plan::MemorySpace_Name(b.space()),
                                                   b.space() == plan::NVME
                                                       ? " but is not state (only state is swapped)"
                                                       : ", which ds-run does not support"));
  if (host && (b.kind() == plan::Buffer::INPUT || b.kind() == plan::Buffer::OUTPUT))
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is a program input or output in host memory"));
  switch (b.kind()) {
  case plan::Buffer::ARENA:
    if (!fitsIn(b.offset(), b.size_bytes(), host ? hostArenaBytes : arenaBytes))
      return absl::InvalidArgumentError(absl::StrCat(
          what, " at ", host ? "host " : "", "arena offset ", b.offset(), " (", b.size_bytes(),
          " bytes) lies outside the ", host ? hostArenaBytes : arenaBytes, "-byte ",
          host ? "host " : "", "arena"));
    if (b.offset() % dtypeSize(b.dtype()) != 0)
      return absl::InvalidArgumentError(absl::StrCat(what, " is misaligned in the arena"));
    return absl::OkStatus();
  case plan::Buffer::WEIGHT:
    if (!fitsIn(b.offset(), b.size_bytes(), weightBytes))
      return absl::InvalidArgumentError(absl::StrCat(
          what, " at weight offset ", b.offset(), " (", b.size_bytes(),
          " bytes) lies outside the ", weightBytes, "-byte weight section"));
    if (b.offset() % dtypeSize(b.dtype()) != 0)
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is misaligned in the weight section"));
    return absl::OkStatus();
  case plan::Buffer::STATE:
    if (b.io_name().empty())
      return absl::InvalidArgumentError(absl::StrCat(what, " (state) has no name"));
    if (!plan::Buffer::StateInit_IsValid(b.state_init()))
      return absl::InvalidArgumentError(absl::StrCat(what, " has an invalid state_init"));
    if (b.state_init() == plan::Buffer::STATE_INIT_WEIGHTS &&
        (!fitsIn(b.offset(), b.size_bytes(), weightBytes) ||
         b.offset() % dtypeSize(b.dtype()) != 0))
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": initial value at weight offset ", b.offset(), " (", b.size_bytes(),
          " bytes) lies outside the ", weightBytes, "-byte weight section"));
    if (!stateNames.insert(b.io_name()).second)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": two state buffers are named '", b.io_name(), "'"));
    // Saved in checkpoints under this name, and its parameter under the
    // part after the prefix ("param:w" -> "w") by --zero-to-fp32.
    for (std::string_view name : {std::string_view(b.io_name()),
                                  std::string_view(b.io_name()).substr(b.io_name().find(':') + 1)})
      if (const char *problem = plan::npzNameProblem(name))
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": the state's name '", absl::CHexEscape(absl::string_view(name.data(), std::min<size_t>(name.size(), 200))), "' ", problem,
            ", so no checkpoint could hold it"));
    return absl::OkStatus();
  case plan::Buffer::INPUT:
  case plan::Buffer::OUTPUT:
    if (b.io_name().empty())
      return absl::InvalidArgumentError(absl::StrCat(what, " has no io_name"));
    return absl::OkStatus();
  default:
    return absl::InvalidArgumentError(absl::StrCat(what, " has an invalid kind"));
  }
}

/// A view (Buffer.alias_of) is an arena buffer on exactly the bytes of an
/// earlier arena buffer that is not itself a view; liveness then treats the
/// two as one (canonicalArena).
absl::Status checkView(const plan::Plan &p, const plan::Buffer &b, int i, const std::string &what) {
  if (!b.has_alias_of()) return absl::OkStatus();
  uint32_t t = b.alias_of();
  if (b.kind() != plan::Buffer::ARENA)
    return absl::InvalidArgumentError(absl::StrCat(what, " is a view but not an arena buffer"));
  if (t >= static_cast<uint32_t>(i))
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is a view of buffer ", t, ", which does not come before it"));
  const plan::Buffer &target = p.buffers(t);
  if (target.kind() != plan::Buffer::ARENA || target.has_alias_of())
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is a view of buffer ", t, ", which is not an arena buffer owning its bytes"));
  if (target.offset() != b.offset() || target.size_bytes() != b.size_bytes() ||
      target.space() != b.space())
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is a view of buffer ", t, " but not on the same bytes (offset ", b.offset(),
        " size ", b.size_bytes(), " vs offset ", target.offset(), " size ",
        target.size_bytes(), ")"));
  return absl::OkStatus();
}

absl::Status checkBuffers(const plan::Plan &p, uint32_t world, uint64_t weightBytes) {
  std::set<std::string> stateNames;
  for (int i = 0; i < p.buffers_size(); ++i) {
    const plan::Buffer &b = p.buffers(i);
    const std::string &label = b.debug_name().empty() ? b.io_name() : b.debug_name();
    std::string what = absl::StrCat("buffer ", i, " (", label.substr(0, 200),
                                    label.size() > 200 ? "..." : "", ")");
    // Type first: the placement checks divide by its element size.
    DS_RETURN_IF_ERROR(checkBufferType(b, i, what));
    DS_RETURN_IF_ERROR(checkRankShards(b, what, world, weightBytes));
    DS_RETURN_IF_ERROR(
        checkBufferKind(b, what, p.arena_bytes(), p.host_arena_bytes(), weightBytes, stateNames));
    DS_RETURN_IF_ERROR(checkView(p, b, i, what));
  }
  return absl::OkStatus();
}

/// An operand id names a buffer of the plan. `where` names the program and
/// the place in it ("program 'forward', inputs", "program 'forward', step 0
/// (...)").
absl::Status checkBufferId(const plan::Plan &p, uint32_t id, const std::string &where) {
  if (id >= static_cast<uint32_t>(p.buffers_size()))
    return absl::InvalidArgumentError(absl::StrCat(where, ": buffer id ", id,
                                                   " is out of range (", p.buffers_size(),
                                                   " buffers)"));
  return absl::OkStatus();
}

/// A program's inputs are INPUT buffers and its outputs OUTPUT buffers,
/// each name once (callers bind and read them by name).
absl::Status checkProgramInterface(const plan::Plan &p, const plan::Program &prog,
                                   const std::string &pw) {
  std::set<std::string> inputNames, outputNames;
  for (uint32_t id : prog.inputs()) {
    DS_RETURN_IF_ERROR(checkBufferId(p, id, absl::StrCat(pw, ", inputs")));
    if (p.buffers(id).kind() != plan::Buffer::INPUT)
      return absl::InvalidArgumentError(
          absl::StrCat(pw, ": input ", id, " is not an INPUT buffer"));
    if (!inputNames.insert(p.buffers(id).io_name()).second)
      return absl::InvalidArgumentError(
          absl::StrCat(pw, ": two inputs are named '", p.buffers(id).io_name(), "'"));
  }
  for (uint32_t id : prog.outputs()) {
    DS_RETURN_IF_ERROR(checkBufferId(p, id, absl::StrCat(pw, ", outputs")));
    if (p.buffers(id).kind() != plan::Buffer::OUTPUT)
      return absl::InvalidArgumentError(
          absl::StrCat(pw, ": output ", id, " is not an OUTPUT buffer"));
    if (!outputNames.insert(p.buffers(id).io_name()).second)
      return absl::InvalidArgumentError(
          absl::StrCat(pw, ": two outputs are named '", p.buffers(id).io_name(), "'"));
  }
  return absl::OkStatus();
}

/// Arena buffer id -> the steps of its first write and its last access.
using LiveRanges = std::map<uint32_t, std::pair<int, int>>;

/// Walks the steps: operand ids in range, no arena buffer read before it is
/// written, an input buffer read only when the program binds it and an
/// output buffer only after the program wrote it (ds-run allocates both
/// without clearing: anything else reads leftover heap memory), no write to
/// weights or inputs.
absl::StatusOr<LiveRanges> arenaLiveRanges(const plan::Plan &p, const plan::Program &prog,
                                           const std::string &pw) {
  LiveRanges live;
  const std::set<uint32_t> bound(prog.inputs().begin(), prog.inputs().end());
  std::set<uint32_t> outputsWritten;
  for (int s = 0; s < prog.steps_size(); ++s) {
    const plan::Step &step = prog.steps(s);
    std::string sw =
        absl::StrCat(pw, ", step ", s, " (", step.kernel(), " at ", step.location(), ")");
    for (uint32_t id : step.inputs()) {
      DS_RETURN_IF_ERROR(checkBufferId(p, id, sw));
      const plan::Buffer &b = p.buffers(id);
      if (b.kind() == plan::Buffer::INPUT && !bound.count(id))
        return absl::InvalidArgumentError(absl::StrCat(
            sw, " reads input buffer ", id, " ('", b.io_name().substr(0, 200),
            "'), which the program does not take as an input"));
      if (b.kind() == plan::Buffer::OUTPUT && !outputsWritten.count(id))
        return absl::InvalidArgumentError(
            absl::StrCat(sw, " reads output buffer ", id, " ('", b.io_name().substr(0, 200),
                         "') before a step of the program writes it"));
      if (p.buffers(id).kind() == plan::Buffer::ARENA) {
        // Reading a view reads the bytes of the buffer it views.
        if (p.buffers(id).has_alias_of()) id = p.buffers(id).alias_of();
        auto it = live.find(id);
        if (it == live.end())
          return absl::InvalidArgumentError(
              absl::StrCat(sw, " reads arena buffer ", id, " before anything writes it"));
        it->second.second = s;
      }
    }
    // A product packs its right operand once at load when the plan says it
    // is constant: only the plan's own weights are (an input is not there
    // yet, and an activation changes every run).
    if (step.attrs().count("constant_weight") &&
        (step.inputs_size() < 2 || p.buffers(step.inputs(1)).kind() != plan::Buffer::WEIGHT))
      return absl::InvalidArgumentError(
          absl::StrCat(sw, " marks operand 1 constant_weight, but it is not a weight buffer"));
    // A quantized product repacks its scales (and zero points) with it.
    if (step.attrs().count("constant_weight") &&
        (step.kernel() == "quantized_matmul" || step.kernel() == "quantized_conv"))
      for (int i = 2; i < (step.attrs().count("zero_point") ? 4 : 3); ++i)
        if (step.inputs_size() <= i || p.buffers(step.inputs(i)).kind() != plan::Buffer::WEIGHT)
          return absl::InvalidArgumentError(absl::StrCat(
              sw, " marks its weight constant_weight, but operand ", i,
              " (its scales or zero points) is not a weight buffer"));
    for (uint32_t id : step.outputs()) {
      DS_RETURN_IF_ERROR(checkBufferId(p, id, sw));
      auto kind = p.buffers(id).kind();
      if (kind == plan::Buffer::WEIGHT || kind == plan::Buffer::INPUT)
        return absl::InvalidArgumentError(absl::StrCat(sw, " writes read-only buffer ", id));
      if (p.buffers(id).has_alias_of())
        return absl::InvalidArgumentError(absl::StrCat(sw, " writes buffer ", id,
                                                       ", a view of buffer ",
                                                       p.buffers(id).alias_of()));
      if (kind == plan::Buffer::OUTPUT) outputsWritten.insert(id);
      if (kind == plan::Buffer::ARENA) {
        auto [it, fresh] = live.emplace(id, std::make_pair(s, s));
        if (!fresh)
          it->second.second = s;
      }
    }
  }
  return live;
}

/// Arena buffers that share bytes must never be live at the same time.
absl::Status checkArenaReuse(const plan::Plan &p, const LiveRanges &live,
                             const std::string &pw) {
  struct Interval { uint64_t lo, hi; int from, to; uint32_t id; };
  std::vector<Interval> iv;
  for (auto &[id, range] : live) {
    const auto &b = p.buffers(id);
    // The host arena's bytes are another range: both arenas are at most
    // 2^62 bytes, so host offsets shifted by 2^62 never meet device ones.
    const uint64_t base = b.space() == plan::HOST ? (uint64_t(1) << 62) : 0;
    if (b.size_bytes() > 0)
      iv.push_back({base + b.offset(), base + b.offset() + b.size_bytes(), range.first,
                    range.second, id});
  }
  std::sort(iv.begin(), iv.end(),
            [](const Interval &a, const Interval &b) { return a.lo < b.lo; });
  for (size_t i = 0; i < iv.size(); ++i)
    for (size_t j = i + 1; j < iv.size() && iv[j].lo < iv[i].hi; ++j)
      if (iv[i].from <= iv[j].to && iv[j].from <= iv[i].to)
        return absl::InvalidArgumentError(absl::StrCat(
            pw, ": arena buffers ", iv[i].id, " and ", iv[j].id,
            " overlap in memory while both are live (steps ", iv[i].from, "-", iv[i].to,
            " and ", iv[j].from, "-", iv[j].to, ")"));
  return absl::OkStatus();
}

/// NVMe buffers are a swap file's bytes: only a fetch reads one (into host
/// memory) and only an offload writes one (from host memory), whole.
absl::Status checkNvmeSteps(const plan::Plan &p, const plan::Program &prog,
                            const std::string &pw) {
  auto nvme = [&](uint32_t id) {
    return id < static_cast<uint32_t>(p.buffers_size()) && p.buffers(id).space() == plan::NVME;
  };
  auto host = [&](uint32_t id) {
    return id < static_cast<uint32_t>(p.buffers_size()) && p.buffers(id).space() == plan::HOST;
  };
  for (int s = 0; s < prog.steps_size(); ++s) {
    const plan::Step &st = prog.steps(s);
    bool reads = std::any_of(st.inputs().begin(), st.inputs().end(), nvme);
    bool writes = std::any_of(st.outputs().begin(), st.outputs().end(), nvme);
    if (!reads && !writes) continue;
    bool swapIn = st.kernel() == "fetch" && reads && !writes && st.outputs_size() == 1 &&
                  host(st.outputs(0));
    bool swapOut = st.kernel() == "offload" && writes && !reads && st.inputs_size() == 1 &&
                   host(st.inputs(0));
    if (!swapIn && !swapOut)
      return absl::InvalidArgumentError(absl::StrCat(
          pw, ", step ", s, " (", st.kernel(), ") touches an NVMe buffer; only a fetch into host "
          "memory reads one and only an offload from host memory writes one"));
  }
  return absl::OkStatus();
}

absl::Status checkProgram(const plan::Plan &p, const plan::Program &prog) {
  std::string pw = absl::StrCat("program '", prog.name(), "'");
  DS_RETURN_IF_ERROR(checkNvmeSteps(p, prog, pw));
  DS_RETURN_IF_ERROR(checkProgramInterface(p, prog, pw));
  DS_ASSIGN_OR_RETURN(LiveRanges live, arenaLiveRanges(p, prog, pw));
  // An output no step writes would hand the caller uninitialized memory.
  std::set<uint32_t> written;
  for (const plan::Step &step : prog.steps())
    written.insert(step.outputs().begin(), step.outputs().end());
  for (uint32_t id : prog.outputs()) {
    const plan::Buffer &b = p.buffers(id);
    if (!b.has_alias_of() && b.size_bytes() > 0 && !written.count(id))
      return absl::InvalidArgumentError(absl::StrCat(pw, ": output ", id, " ('", b.io_name(),
                                                     "') is never written by a step"));
  }
  return checkArenaReuse(p, live, pw);
}

} // namespace

/// Strings of the plan message are protobuf `string`s: anything but UTF-8
/// makes the serialized plan unparseable (names come from ONNX files).
bool isUtf8(const std::string &s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += n;
  }
  return true;
}

std::string utf8Escaped(const std::string &s) {
  if (isUtf8(s)) return s;
  std::string out;
  for (unsigned char c : s)
    out += c < 0x80 ? std::string(1, static_cast<char>(c)) : absl::StrFormat("\\x%02x", c);
  return out;
}

namespace {
std::string escaped(const std::string &s) {
  std::string out;
  for (unsigned char c : s)
    out += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c))
                                 : absl::StrFormat("\\x%02x", c);
  return out;
}

absl::Status checkUtf8(const plan::Plan &p) {
  for (int i = 0; i < p.buffers_size(); ++i) {
    const auto &b = p.buffers(i);
    for (const std::string *s : {&b.io_name(), &b.debug_name()})
      if (!isUtf8(*s))
        return absl::InvalidArgumentError(absl::StrCat(
            "buffer %", i, " is named '", escaped(*s),
            "', which is not valid UTF-8 (ONNX names must be UTF-8 strings)"));
  }
  for (const std::string *s : {&p.producer(), &p.source()})
    if (!isUtf8(*s))
      return absl::InvalidArgumentError(
          absl::StrCat("the plan's producer or source ('", escaped(*s), "') is not valid UTF-8"));
  for (const auto &prog : p.programs()) {
    if (!isUtf8(prog.name()))
      return absl::InvalidArgumentError(
          absl::StrCat("program '", escaped(prog.name()), "' is not named in valid UTF-8"));
    for (const auto &step : prog.steps()) {
      if (!isUtf8(step.location()))
        return absl::InvalidArgumentError(absl::StrCat(
            "a ", step.kernel(), " step of '", prog.name(), "' has a location ('",
            escaped(step.location()), "') that is not valid UTF-8"));
    }
    for (const auto &step : prog.steps())
      for (const auto &[name, a] : step.attrs())
        if (!isUtf8(name) || (a.value_case() == plan::Attribute::kS && !isUtf8(a.s())))
          return absl::InvalidArgumentError(absl::StrCat(
              "a ", step.kernel(), " step of '", prog.name(), "' has attribute '", escaped(name),
              "' with a value that is not valid UTF-8"));
  }
  return absl::OkStatus();
}
} // namespace

namespace {
/// The training section's numbers drive loops, schedules and the update:
/// each must be in the range ds-opt writes (a plan from elsewhere could
/// say anything; docs/security.md).
absl::Status checkTraining(const plan::Plan &p) {
  if (!p.has_training()) return absl::OkStatus();
  const plan::Training &t = p.training();
  auto bad = [](const std::string &field, const std::string &why) {
    return absl::InvalidArgumentError(absl::StrCat("the plan's training ", field, " ", why));
  };
  auto finite = [](double v) { return std::isfinite(v); };
  if (t.micro_batch_size() < 1 || t.micro_batch_size() > (int64_t(1) << 32))
    return bad("micro_batch_size", absl::StrCat(t.micro_batch_size(), " is not in [1, 2^32]"));
  if (t.gradient_accumulation_steps() < 1 || t.gradient_accumulation_steps() > (1 << 20))
    return bad("gradient_accumulation_steps",
               absl::StrCat(t.gradient_accumulation_steps(), " is not in [1, 2^20]"));
  if (t.world_size() < 0 || t.world_size() > (1 << 20) || t.world_size() > std::max<uint32_t>(1, p.world_size()))
    return bad("world_size", absl::StrCat(t.world_size(), " does not fit the plan's ",
                                          p.world_size(), " ranks"));
  if (t.zero_stage() < 0 || t.zero_stage() > 3)
    return bad("zero_stage", absl::StrCat(t.zero_stage(), " is not 0 to 3"));
  if (!finite(t.gradient_clipping()) || t.gradient_clipping() < 0)
    return bad("gradient_clipping", "must be finite and >= 0");
  const plan::Optimizer &o = t.optimizer();
  if (!plan::Optimizer::Kind_IsValid(o.kind())) return bad("optimizer kind", "is unknown");
  if (!finite(o.lr()) || o.lr() < 0) return bad("optimizer lr", "must be finite and >= 0");
  if (!finite(o.muon_lr()) || o.muon_lr() < 0)
    return bad("optimizer muon_lr", "must be finite and >= 0");
  if (o.kind() == plan::Optimizer::ZERO_ONE_ADAM &&
      (o.var_update_scaler() < 1 || o.local_step_scaler() < 1 || o.local_step_clipper() < 1 ||
       o.var_freeze_step() < 0))
    return bad("optimizer", "ZeroOneAdam's scalers and clipper must be >= 1 and var_freeze_step >= 0");
  if (o.kind() != plan::Optimizer::SGD && o.kind() != plan::Optimizer::ADAGRAD &&
      (!(o.beta1() >= 0 && o.beta1() < 1) || !(o.beta2() >= 0 && o.beta2() < 1) ||
       !(o.eps() >= 0) || !finite(o.eps()) ||
       (o.eps() > 0 && o.eps() < static_cast<double>(std::numeric_limits<float>::min()))))
    return bad("optimizer betas or eps",
               "are outside [0, 1), or eps is negative or below the smallest normal float");
  if (!finite(o.weight_decay()) || o.weight_decay() < 0 || !finite(o.momentum()) ||
      o.momentum() < 0 || !finite(o.dampening()) || o.dampening() < 0)
    return bad("optimizer weight_decay, momentum or dampening", "must be finite and >= 0");
  // The config reader's rules (lib/Config/DeepSpeedConfig.cpp): rates and
  // ratios >= 0, and a cosine schedule's decay phase of at least one step
  // (its formula divides by total - warmup).
  const plan::Schedule &sc = t.schedule();
  if (!plan::Schedule::Kind_IsValid(sc.kind())) return bad("schedule kind", "is unknown");
  auto rate = [&](double v) { return finite(v) && v >= 0; };
  if (!rate(sc.warmup_min_lr()) || !rate(sc.warmup_max_lr()) || !rate(sc.warmup_min_ratio()) ||
      !rate(sc.cos_min_ratio()) || sc.warmup_num_steps() < 0 || sc.total_num_steps() < 0)
    return bad("schedule", "has a negative or non-finite rate, or a negative step count");
  if (sc.kind() == plan::Schedule::WARMUP_COSINE_LR && sc.total_num_steps() <= sc.warmup_num_steps())
    return bad("schedule total_num_steps",
               absl::StrCat(sc.total_num_steps(), " must be greater than warmup_num_steps (",
                            sc.warmup_num_steps(), ") for WarmupCosineLR"));
  if (sc.kind() == plan::Schedule::WARMUP_DECAY_LR && sc.total_num_steps() < 1)
    return bad("schedule total_num_steps", "must be > 0 for WarmupDecayLR");
  if (sc.kind() == plan::Schedule::ONE_CYCLE &&
      (!rate(sc.cycle_min_lr()) || !rate(sc.cycle_max_lr()) || !rate(sc.decay_lr_rate()) ||
       !(sc.cycle_first_step_size() > 0) || !finite(sc.cycle_first_step_size()) ||
       !rate(sc.cycle_second_step_size()) || !rate(sc.decay_step_size()) ||
       sc.cycle_first_stair_count() < 0 || sc.cycle_second_stair_count() < 0 ||
       !rate(sc.decay_mom_rate()) || !(sc.cycle_min_mom() >= 0 && sc.cycle_min_mom() < 1) ||
       !(sc.cycle_max_mom() >= 0 && sc.cycle_max_mom() < 1)))
    return bad("schedule", "has a OneCycle setting out of range");
  if (sc.kind() == plan::Schedule::LR_RANGE_TEST &&
      (!rate(sc.range_min_lr()) || !rate(sc.range_step_rate()) || sc.range_step_size() < 1))
    return bad("schedule", "has an LRRangeTest setting out of range");
  if (!t.precision().empty() && t.precision() != "fp32" && t.precision() != "bf16" &&
      t.precision() != "fp16")
    return bad("precision", absl::StrCat("'", t.precision(), "' is not fp32, bf16 or fp16"));
  const plan::LossScaler &ls = t.loss_scaler();
  if (!finite(ls.static_scale()) || ls.static_scale() < 0 || !finite(ls.initial_scale()) ||
      ls.initial_scale() < 0 || ls.scale_window() < 0 || ls.hysteresis() < 0 ||
      !finite(ls.min_scale()) || ls.min_scale() < 0)
    return bad("loss_scaler", "has a negative or non-finite setting");
  // Scales outside f32's normal range are inf or flushed to 0 in the kernels.
  auto normalF32 = [](double v) {
    return v == 0 || (v >= static_cast<double>(std::numeric_limits<float>::min()) &&
                      v <= static_cast<double>(std::numeric_limits<float>::max()));
  };
  if (!normalF32(ls.static_scale()) || !normalF32(ls.initial_scale()) ||
      !normalF32(ls.min_scale()))
    return bad("loss_scaler", "has a scale outside the range of normal floats");
  if (t.steps_per_print() < 0) return bad("steps_per_print", "is negative");
  return absl::OkStatus();
}
} // namespace

absl::Status validatePlanStructure(const plan::Plan &p, uint64_t weightBytes) {
  DS_RETURN_IF_ERROR(checkUtf8(p));
  // Sizes the runtime allocates: bounded like every byte size (2^62).
  if (p.arena_bytes() > (uint64_t(1) << 62))
    return absl::InvalidArgumentError(
        absl::StrCat("the plan's arena of ", p.arena_bytes(), " bytes is larger than 2^62"));
  if (p.host_arena_bytes() > (uint64_t(1) << 62))
    return absl::InvalidArgumentError(absl::StrCat("the plan's host arena of ",
                                                   p.host_arena_bytes(),
                                                   " bytes is larger than 2^62"));
  if (std::any_of(p.buffers().begin(), p.buffers().end(),
                  [](const plan::Buffer &b) { return b.space() == plan::NVME; })) {
    const plan::NvmeSwap &n = p.nvme();
    if (n.block_size() == 0 || n.block_size() % 4096 != 0 || n.block_size() > (1u << 30))
      return absl::InvalidArgumentError(absl::StrCat(
          "the plan's NVMe block size ", n.block_size(), " is not a multiple of 4096 in (0, 1 GiB]"));
    if (n.queue_depth() == 0 || n.queue_depth() > 4096 || n.buffer_count() == 0 ||
        n.buffer_count() > 4096)
      return absl::InvalidArgumentError(absl::StrCat(
          "the plan's NVMe queue depth ", n.queue_depth(), " and buffer count ",
          n.buffer_count(), " must be in [1, 4096]"));
  }
  if (p.device_memory_budget() > (uint64_t(1) << 62))
    return absl::InvalidArgumentError(absl::StrCat("the plan's device memory budget of ",
                                                   p.device_memory_budget(),
                                                   " bytes is larger than 2^62"));
  const uint32_t world = std::max<uint32_t>(1, p.world_size());
  DS_RETURN_IF_ERROR(checkWorldAndMesh(p, world));
  DS_RETURN_IF_ERROR(checkBuffers(p, world, weightBytes));
  for (const auto &prog : p.programs())
    DS_RETURN_IF_ERROR(checkProgram(p, prog));
  DS_RETURN_IF_ERROR(checkTraining(p));
  return absl::OkStatus();
}

namespace {
std::string attrToString(const plan::Attribute &a) {
  switch (a.value_case()) {
  case plan::Attribute::kI: return absl::StrCat(a.i());
  case plan::Attribute::kF: return absl::StrCat(a.f());
  case plan::Attribute::kS: return absl::StrCat("\"", a.s(), "\"");
  case plan::Attribute::kInts: return absl::StrCat("[", absl::StrJoin(a.ints().values(), ","), "]");
  case plan::Attribute::kFloats: return absl::StrCat("[", absl::StrJoin(a.floats().values(), ","), "]");
  default: return "?";
  }
}
const char *kindName(plan::Buffer::Kind k) {
  switch (k) {
  case plan::Buffer::INPUT: return "input";
  case plan::Buffer::OUTPUT: return "output";
  case plan::Buffer::ARENA: return "arena";
  case plan::Buffer::WEIGHT: return "weight";
  case plan::Buffer::STATE: return "state";
  default: return "?";
  }
}
} // namespace

SpaceBytes spaceBytes(const plan::Plan &p) {
  SpaceBytes s;
  for (const auto &b : p.buffers())
    if (b.space() == plan::NVME) s.nvme += b.size_bytes();
  s.deviceArena = p.arena_bytes();
  s.hostArena = p.host_arena_bytes();
  s.device = s.deviceArena;
  s.host = s.hostArena;
  for (const auto &b : p.buffers()) {
    if (b.space() == plan::NVME) continue;
    const bool host = b.space() == plan::HOST;
    switch (b.kind()) {
    case plan::Buffer::STATE:
      (host ? s.hostState : s.deviceState) += b.size_bytes();
      [[fallthrough]];
    case plan::Buffer::WEIGHT:
    case plan::Buffer::INPUT:
    case plan::Buffer::OUTPUT:
      (host ? s.host : s.device) += b.size_bytes();
      break;
    default:
      break;
    }
  }
  return s;
}

absl::Status checkDeviceBudget(const SpaceBytes &s, uint64_t budget) {
  if (!budget || s.device <= budget) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the plan needs ", s.device, " bytes of device memory per rank (arena ", s.deviceArena,
      ", state ", s.deviceState, ", weights, inputs and outputs ",
      s.device - s.deviceArena - s.deviceState, "), over the device memory budget of ", budget,
      " bytes; offload more (training: zero_optimization.offload_optimizer, offload_param; "
      "inference: ds-opt --offload-weights cpu) or raise --device-memory"));
}

std::string dumpPlan(const plan::Plan &p) {
  std::string out;
  absl::StrAppend(&out, "plan schema ", p.schema_version(), ", produced by ",
                  p.producer(), " from ", p.source(), "\n");
  absl::StrAppend(&out, "world size ", p.world_size(), ", arena ", p.arena_bytes(),
                  " bytes, weights ", p.weight_bytes(), " bytes, ",
                  p.host_arena_bytes() ? absl::StrCat("host arena ", p.host_arena_bytes(),
                                                      " bytes, ")
                                       : std::string(),
                  p.device_memory_budget()
                      ? absl::StrCat("device budget ", p.device_memory_budget(), " bytes, ")
                      : std::string(),
                  p.buffers_size(), " buffers\n\nbuffers:\n");
  for (const auto &b : p.buffers()) {
    std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
    absl::StrAppend(&out, absl::StrFormat("  %%%-4u %-6s %-5s %-16s", b.id(),
                                          kindName(b.kind()), dtypeName(b.dtype()),
                                          shapeToString(shape)));
    if (b.kind() == plan::Buffer::ARENA || b.kind() == plan::Buffer::WEIGHT)
      absl::StrAppend(&out, " @", b.offset(), " +", b.size_bytes());
    if (b.has_alias_of()) absl::StrAppend(&out, " view of %", b.alias_of());
    if (b.space() == plan::HOST) absl::StrAppend(&out, " host");
    if (b.space() == plan::NVME) absl::StrAppend(&out, " nvme");
    if (b.kind() == plan::Buffer::STATE)
      absl::StrAppend(&out, b.state_init() == plan::Buffer::STATE_INIT_ZERO
                                ? " zero-init"
                                : absl::StrCat(" init @", b.offset(), " +", b.size_bytes()));
    if (!b.io_name().empty())
      absl::StrAppend(&out, " \"", b.io_name(), "\"");
    if (!b.debug_name().empty())
      absl::StrAppend(&out, "  ; ", b.debug_name());
    absl::StrAppend(&out, "\n");
  }
  for (const auto &prog : p.programs()) {
    absl::StrAppend(&out, "\nprogram ", prog.name(), "(",
                    absl::StrJoin(prog.inputs(), ", ",
                                  [](std::string *o, uint32_t id) { absl::StrAppend(o, "%", id); }),
                    ") -> (",
                    absl::StrJoin(prog.outputs(), ", ",
                                  [](std::string *o, uint32_t id) { absl::StrAppend(o, "%", id); }),
                    "):\n");
    for (const auto &s : prog.steps()) {
      auto ids = [](const auto &v) {
        return absl::StrJoin(v, ", ", [](std::string *o, uint32_t id) {
          absl::StrAppend(o, "%", id);
        });
      };
      absl::StrAppend(&out, "  ", ids(s.outputs()), " = ", s.kernel(), "(",
                      ids(s.inputs()), ")");
      if (!s.attrs().empty()) {
        std::map<std::string, plan::Attribute> sorted(s.attrs().begin(), s.attrs().end());
        absl::StrAppend(&out, " {",
                        absl::StrJoin(sorted, ", ",
                                      [](std::string *o, const auto &kv) {
                                        absl::StrAppend(o, kv.first, "=", attrToString(kv.second));
                                      }),
                        "}");
      }
      if (!s.location().empty())
        absl::StrAppend(&out, "  ; ", s.location());
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

} // namespace ds::rt
