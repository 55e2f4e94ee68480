// ZeRO-Infinity's NVMe swapper: state buffers whose space is NVME live in one
// swap file per rank under the plan's nvme_path and move to and from host
// memory through `buffer_count` aligned staging buffers of `block_size`
// bytes, with up to `queue_depth` reads or writes in flight on io_uring with
// O_DIRECT (DeepSpeed's aio settings). Every transfer is checked: a short
// read or write, EIO or ENOSPC is an error naming the file and the offset,
// and each block's CRC-32C is recorded when written and verified when read
// back. The file is unlinked as soon as it is created, so it disappears
// when the process ends, however it ends. docs/offload.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/plan/Status.h"

namespace ds::rt {

struct NvmeSwapOptions {
  std::string directory;      // nvme_path
  uint64_t blockSize = 1 << 20;
  uint32_t queueDepth = 8;
  uint32_t bufferCount = 4;
  std::string fileTag;        // distinguishes the ranks' files ("rank0")
};

class NvmeSwapper {
public:
  /// Creates the swap file for `regionBytes` (each region's size, in the
  /// order regions are numbered), reserving the whole size up front so a
  /// full disk is found now, not mid-step.
  static absl::StatusOr<std::unique_ptr<NvmeSwapper>> create(const NvmeSwapOptions &opts,
                                                             const std::vector<uint64_t> &regionBytes);
  ~NvmeSwapper();
  NvmeSwapper(const NvmeSwapper &) = delete;
  NvmeSwapper &operator=(const NvmeSwapper &) = delete;

  /// Writes `bytes` (the region's size) from `src` to region `r`.
  absl::Status write(uint32_t r, const void *src);
  /// Reads region `r` into `dst`; a region never written reads as zeros.
  absl::Status read(uint32_t r, void *dst);
  /// Several regions as one stream of I/O: the queue stays full across
  /// their boundaries (a sub-group's swap).
  struct Transfer {
    uint32_t region;
    void *host;
    std::string name = {}; // the state's name, for errors
  };
  absl::Status writeMany(const std::vector<Transfer> &regions);
  absl::Status readMany(const std::vector<Transfer> &regions);

  /// Whether region `r` was written (else it holds nothing yet).
  bool written(uint32_t r) const { return r < regions_.size() && regions_[r].written; }
  uint64_t bytesRead() const { return bytesRead_; }
  uint64_t bytesWritten() const { return bytesWritten_; }
  double secondsReading() const { return secondsReading_; }
  double secondsWriting() const { return secondsWriting_; }
  const std::string &path() const { return path_; }

private:
  NvmeSwapper() = default;
  absl::Status transfer(const std::vector<Transfer> &jobs, bool toFile);

  struct Region {
    uint64_t offset = 0, bytes = 0;
    bool written = false;
    std::vector<uint32_t> blockCrc; // per block_size piece
  };
  std::string path_;
  int fd_ = -1;
  NvmeSwapOptions opts_;
  std::vector<Region> regions_;
  std::vector<void *> buffers_; // block_size each, aligned for O_DIRECT
  struct Ring;
  std::unique_ptr<Ring> ring_;
  uint64_t bytesRead_ = 0, bytesWritten_ = 0;
  double secondsReading_ = 0, secondsWriting_ = 0;
};

} // namespace ds::rt
