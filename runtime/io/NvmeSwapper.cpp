#include "runtime/io/NvmeSwapper.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "absl/strings/str_cat.h"

namespace ds::rt {

namespace {
constexpr uint64_t kSector = 4096; // O_DIRECT's alignment of offsets, lengths and memory

uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

// The per-block checksum stays in memory (it only has to tell a block read
// back from the one written), so its polynomial is free: CRC-32C, which
// SSE4.2 computes 8 bytes an instruction, many times zlib's table CRC-32 that
// would otherwise halve the swapper's read bandwidth; zlib's where the CPU
// lacks it (checked at run time).
#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32cHardware(const uint8_t *p, uint64_t n) {
  uint64_t c = 0xffffffffu;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return ~c32;
}
#endif

uint32_t blockChecksum(const void *data, uint64_t n) {
#if defined(__x86_64__)
  static const bool hw = __builtin_cpu_supports("sse4.2");
  if (hw) return crc32cHardware(static_cast<const uint8_t *>(data), n);
#endif
  return static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef *>(data), n));
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
} // namespace

struct NvmeSwapper::Ring {
  io_uring ring;
};

absl::StatusOr<std::unique_ptr<NvmeSwapper>>
NvmeSwapper::create(const NvmeSwapOptions &opts, const std::vector<uint64_t> &regionBytes) {
  if (opts.blockSize == 0 || opts.blockSize % kSector != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the NVMe block size ", opts.blockSize, " is not a positive multiple of ", kSector));
  if (opts.queueDepth == 0 || opts.bufferCount == 0)
    return absl::InvalidArgumentError("the NVMe queue depth and buffer count must be positive");
  struct stat st;
  if (::stat(opts.directory.c_str(), &st) != 0)
    return absl::FailedPreconditionError(absl::StrCat("nvme_path ", opts.directory, ": ",
                                                      std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat("nvme_path ", opts.directory,
                                                   " is not a directory"));
  std::unique_ptr<NvmeSwapper> s(new NvmeSwapper());
  s->opts_ = opts;
  // An unnamed file (O_TMPFILE): nothing in the directory another process
  // could pre-create, follow or open, and its space is freed when the
  // process ends, however it ends. Without O_DIRECT on a file system that
  // lacks it (tmpfs: buffered I/O).
  s->path_ = absl::StrCat(opts.directory, " (", opts.fileTag, "'s unnamed swap file)");
  s->fd_ = ::open(opts.directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC | O_DIRECT, 0600);
  if (s->fd_ < 0 && errno == EINVAL)
    s->fd_ = ::open(opts.directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (s->fd_ < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
    // No O_TMPFILE here: a name no other process can guess, created
    // exclusively and unlinked at once.
    std::string name = absl::StrCat(opts.directory, "/ds-swap-", opts.fileTag, "-XXXXXX");
    int fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) {
      ::unlink(name.c_str());
      s->fd_ = fd;
    }
  }
  if (s->fd_ < 0)
    return absl::PermissionDeniedError(absl::StrCat("cannot create an NVMe swap file in ",
                                                    opts.directory, ": ", std::strerror(errno)));
  // A file-size limit (ulimit -f) would kill the process with SIGXFSZ at
  // the first write past it; ignored, the write fails with EFBIG and the
  // error names the file.
  ::signal(SIGXFSZ, SIG_IGN);
  uint64_t total = 0;
  for (uint64_t bytes : regionBytes) {
    Region r;
    r.offset = total;
    r.bytes = bytes;
    r.blockCrc.assign((bytes + opts.blockSize - 1) / opts.blockSize, 0);
    s->regions_.push_back(std::move(r));
    // Regions start on O_DIRECT's alignment, not the block size: a small
    // state costs its bytes rounded to 4 KiB, however large the blocks.
    total += roundUp(std::max<uint64_t>(bytes, 1), kSector);
  }
  if (total) {
    int err = ::posix_fallocate(s->fd_, 0, static_cast<off_t>(total));
    if (err)
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot reserve ", total, " bytes for the NVMe swap file in ", s->path_, ": ",
          std::strerror(err)));
  }
  // No I/O is larger than the largest region: staging buffers past it
  // would only hold memory (a 1 GiB block size for kilobytes of state).
  uint64_t largest = 0;
  for (uint64_t bytes : regionBytes) largest = std::max(largest, bytes);
  s->opts_.blockSize = std::min<uint64_t>(opts.blockSize, roundUp(std::max<uint64_t>(largest, 1), kSector));
  for (auto &r : s->regions_)
    r.blockCrc.assign((r.bytes + s->opts_.blockSize - 1) / s->opts_.blockSize, 0);
  for (uint32_t i = 0; i < opts.bufferCount; ++i) {
    void *p = nullptr;
    if (::posix_memalign(&p, kSector, s->opts_.blockSize) != 0)
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", opts.bufferCount, " NVMe staging buffers of ", opts.blockSize,
          " bytes"));
    s->buffers_.push_back(p);
  }
  s->ring_ = std::make_unique<Ring>();
  if (int err = io_uring_queue_init(opts.queueDepth, &s->ring_->ring, 0); err < 0) {
    s->ring_.reset();
    return absl::UnavailableError(absl::StrCat("io_uring_queue_init(", opts.queueDepth,
                                               ") failed: ", std::strerror(-err)));
  }
  return s;
}

NvmeSwapper::~NvmeSwapper() {
  if (ring_) io_uring_queue_exit(&ring_->ring);
  for (void *p : buffers_) std::free(p);
  if (fd_ >= 0) ::close(fd_);
}

absl::Status NvmeSwapper::write(uint32_t r, const void *src) {
  return transfer({{r, const_cast<void *>(src)}}, /*toFile=*/true);
}

absl::Status NvmeSwapper::read(uint32_t r, void *dst) { return readMany({{r, dst}}); }

absl::Status NvmeSwapper::writeMany(const std::vector<Transfer> &regions) {
  return transfer(regions, /*toFile=*/true);
}

absl::Status NvmeSwapper::readMany(const std::vector<Transfer> &regions) {
  std::vector<Transfer> io;
  for (const Transfer &t : regions) {
    if (t.region >= regions_.size()) return absl::InternalError("NVMe region out of range");
    if (regions_[t.region].written) io.push_back(t);
    else std::memset(t.host, 0, regions_[t.region].bytes); // zero-initialized, never swapped out
  }
  return io.empty() ? absl::OkStatus() : transfer(io, /*toFile=*/false);
}

// The blocks of all the regions go through the staging buffers, up to
// min(buffer_count, queue_depth) in flight across region boundaries (a
// sub-group's many mid-size tensors keep the queue as full as one large
// one): a write copies a block into a free buffer and submits it; a read
// submits into free buffers and copies each completed block out, after
// checking its CRC-32C.
absl::Status NvmeSwapper::transfer(const std::vector<Transfer> &jobs, bool toFile) {
  for (const Transfer &t : jobs)
    if (t.region >= regions_.size()) return absl::InternalError("NVMe region out of range");
  const auto start = std::chrono::steady_clock::now();
  const uint64_t bs = opts_.blockSize;
  // Every (job, block) in order.
  std::vector<std::pair<uint32_t, uint32_t>> order;
  uint64_t total = 0;
  for (uint32_t j = 0; j < jobs.size(); ++j) {
    const Region &reg = regions_[jobs[j].region];
    for (uint32_t b = 0; b < reg.blockCrc.size(); ++b) order.push_back({j, b});
    total += reg.bytes;
  }
  const size_t slots = std::min<size_t>(buffers_.size(), opts_.queueDepth);
  std::vector<int64_t> slotItem(slots, -1); // the item of `order` a slot's buffer holds
  auto regionOf = [&](size_t item) -> Region & { return regions_[jobs[order[item].first].region]; };
  auto hostOf = [&](size_t item) {
    return static_cast<uint8_t *>(jobs[order[item].first].host) + uint64_t(order[item].second) * bs;
  };
  auto blockLen = [&](size_t item) {
    return std::min<uint64_t>(bs, regionOf(item).bytes - uint64_t(order[item].second) * bs);
  };
  auto fileOffset = [&](size_t item) { return regionOf(item).offset + uint64_t(order[item].second) * bs; };
  absl::Status failure;
  size_t next = 0, inFlight = 0;
  auto submit = [&](size_t slot) {
    size_t item = next++;
    slotItem[slot] = static_cast<int64_t>(item);
    uint64_t len = blockLen(item), ioLen = roundUp(len, kSector);
    io_uring_sqe *sqe = io_uring_get_sqe(&ring_->ring);
    if (toFile) {
      std::memcpy(buffers_[slot], hostOf(item), len);
      std::memset(static_cast<uint8_t *>(buffers_[slot]) + len, 0, ioLen - len);
      regionOf(item).blockCrc[order[item].second] = blockChecksum(buffers_[slot], len);
      io_uring_prep_write(sqe, fd_, buffers_[slot], static_cast<unsigned>(ioLen), fileOffset(item));
    } else {
      io_uring_prep_read(sqe, fd_, buffers_[slot], static_cast<unsigned>(ioLen), fileOffset(item));
    }
    io_uring_sqe_set_data64(sqe, slot);
    ++inFlight;
  };
  auto fail = [&](size_t item, const std::string &what) {
    if (failure.ok())
      failure = absl::DataLossError(absl::StrCat(
          jobs[order[item].first].name.empty() ? "" : "state '", jobs[order[item].first].name,
          jobs[order[item].first].name.empty() ? "" : "': ",
          toFile ? "writing" : "reading", " the NVMe swap file in ", path_, " at offset ",
          fileOffset(item), " (", blockLen(item), " bytes): ", what));
  };
  for (size_t slot = 0; slot < slots && next < order.size(); ++slot) submit(slot);
  while (inFlight > 0) {
    if (int err = io_uring_submit(&ring_->ring); err < 0 && failure.ok())
      failure = absl::UnavailableError(absl::StrCat("io_uring_submit: ", std::strerror(-err)));
    io_uring_cqe *cqe = nullptr;
    int err = io_uring_wait_cqe(&ring_->ring, &cqe);
    if (err < 0) {
      if (err == -EINTR) continue;
      return absl::UnavailableError(absl::StrCat("io_uring_wait_cqe: ", std::strerror(-err)));
    }
    size_t slot = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
    int res = cqe->res;
    io_uring_cqe_seen(&ring_->ring, cqe);
    --inFlight;
    size_t item = static_cast<size_t>(slotItem[slot]);
    uint64_t len = blockLen(item), ioLen = roundUp(len, kSector);
    if (res < 0) {
      fail(item, std::strerror(-res));
    } else if (static_cast<uint64_t>(res) != ioLen) {
      fail(item, absl::StrCat("short ", toFile ? "write" : "read", " of ", res, " bytes"));
    } else if (!toFile) {
      uint32_t crc = blockChecksum(buffers_[slot], len);
      if (crc != regionOf(item).blockCrc[order[item].second])
        fail(item, "its CRC-32C differs from the one written (the swap file was damaged)");
      else
        std::memcpy(hostOf(item), buffers_[slot], len);
    }
    if (failure.ok() && next < order.size()) submit(slot);
  }
  if (!failure.ok()) return failure;
  if (toFile) {
    bytesWritten_ += total;
    secondsWriting_ += secondsSince(start);
    for (const Transfer &t : jobs) {
      Region &reg = regions_[t.region];
      reg.written = true;
      // Test hook: damage the first block on disk after it was written, as
      // a failing drive would (test/Runtime/offload-nvme.test).
      if (const char *flip = std::getenv("DS_TEST_DAMAGE_SWAP"); flip && *flip == '1' && reg.bytes) {
        if (::pread(fd_, buffers_[0], kSector, reg.offset) == static_cast<ssize_t>(kSector)) {
          static_cast<uint8_t *>(buffers_[0])[0] ^= 0x40;
          (void)::pwrite(fd_, buffers_[0], kSector, reg.offset);
        }
      }
    }
  } else {
    bytesRead_ += total;
    secondsReading_ += secondsSince(start);
  }
  return absl::OkStatus();
}

} // namespace ds::rt
