#include "runtime/train/Data.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "absl/strings/str_join.h"
#include "runtime/io/Npy.h"

#include <zlib.h>

namespace ds::rt {

namespace {
/// Float data must be finite: a NaN would be trained on silently (a ReLU
/// or a masked position can hide it from the loss) and poison the weights.
absl::Status checkFinite(const std::string &path, const std::string &name, const HostArray &a) {
  const int64_t n = a.dtype == ds::plan::F32 ? static_cast<int64_t>(a.data.size() / 4)
                    : a.dtype == ds::plan::F64 ? static_cast<int64_t>(a.data.size() / 8)
                                               : 0;
  const int64_t perSample = a.shape.empty() ? 1 : std::max<int64_t>(1, n / std::max<int64_t>(1, a.shape[0]));
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if (a.dtype == ds::plan::F32) {
      float f;
      std::memcpy(&f, a.data.data() + 4 * i, 4);
      v = f;
    } else {
      std::memcpy(&v, a.data.data() + 8 * i, 8);
    }
    if (std::isfinite(v)) continue;
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s[%s]: sample %d holds %s (element %d of the sample); ds does not train on "
        "non-finite data: clean or drop that sample",
        path, name, i / perSample, std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf"),
        i % perSample));
  }
  return absl::OkStatus();
}
} // namespace

absl::StatusOr<DataLoader> DataLoader::open(const std::string &path, const ds::plan::Plan &plan,
                                            const ds::plan::Program &program,
                                            const std::vector<std::string> &dataInputs,
                                            int64_t microBatch, int64_t rank, int64_t worldSize,
                                            bool shuffle, uint64_t seed) {
  DS_ASSIGN_OR_RETURN(auto arrays, readNpz(path));
  std::map<std::string, HostArray> byName;
  for (auto &[n, a] : arrays) byName[n] = std::move(a);
  DataLoader d;
  d.microBatch_ = microBatch;
  d.rank_ = rank;
  d.worldSize_ = worldSize;
  d.shuffle_ = shuffle;
  d.seed_ = seed;
  d.samples_ = -1;
  d.path_ = path;
  for (uint32_t id : program.inputs()) {
    const auto &b = plan.buffers(id);
    if (std::find(dataInputs.begin(), dataInputs.end(), b.io_name()) == dataInputs.end())
      continue;
    auto it = byName.find(b.io_name());
    if (it == byName.end()) {
      std::vector<std::string> have;
      for (auto &kv : byName) have.push_back(kv.first);
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": no array '", b.io_name(), "' (the training step needs ",
          absl::StrJoin(dataInputs, ", "), "; the file has ", absl::StrJoin(have, ", "), ")"));
    }
    HostArray &a = it->second;
    if (b.shape_size() == 0 || b.shape(0) != microBatch)
      return absl::InvalidArgumentError(absl::StrCat(
          "training input '", b.io_name(), "' has shape [",
          shapeToString(std::vector<int64_t>(b.shape().begin(), b.shape().end())),
          "], not a leading micro-batch dimension of ", microBatch));
    std::vector<int64_t> perSample(b.shape().begin() + 1, b.shape().end());
    std::vector<int64_t> got(a.shape.begin() + (a.shape.empty() ? 0 : 1), a.shape.end());
    if (a.dtype != b.dtype())
      return absl::InvalidArgumentError(absl::StrCat(path, "[", b.io_name(), "] must be ",
                                                     dtypeName(b.dtype()), ", got ",
                                                     dtypeName(a.dtype)));
    if (a.shape.empty() || got != perSample)
      return absl::InvalidArgumentError(absl::StrCat(
          path, "[", b.io_name(), "] must be [samples, ", shapeToString(perSample), "], got [",
          shapeToString(a.shape), "]"));
    if (d.samples_ >= 0 && a.shape[0] != d.samples_)
      return absl::InvalidArgumentError(absl::StrCat(path, ": arrays disagree on the sample count (",
                                                     d.samples_, " and ", a.shape[0], " in '",
                                                     b.io_name(), "')"));
    d.samples_ = a.shape[0];
    DS_RETURN_IF_ERROR(checkFinite(path, b.io_name(), a));
    Array arr;
    arr.name = b.io_name();
    arr.sampleBytes = a.data.size() / std::max<int64_t>(1, a.shape[0]);
    arr.data = std::move(a);
    d.arrays_.push_back(std::move(arr));
  }
  // An array the step does not take is refused (as --inputs refuses one):
  // a misspelt name would otherwise be ignored, silently.
  for (const auto &kv : byName)
    if (std::find(dataInputs.begin(), dataInputs.end(), kv.first) == dataInputs.end())
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": array '", kv.first, "' is not an input of the training step (it takes ",
          absl::StrJoin(dataInputs, ", "), ")"));
  if (d.arrays_.empty())
    return absl::InvalidArgumentError("the training program takes no data inputs");
  if (d.samples_ < microBatch * worldSize)
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has ", d.samples_, " samples, fewer than one global micro-batch (",
        microBatch * worldSize, ")"));
  return d;
}

uint64_t DataLoader::contentHash() const {
  // CRC-32 (zlib: several GB/s) of each array, with its name, type and
  // shape, combined in the arrays' order.
  uint64_t h = 0;
  for (const Array &a : arrays_) {
    uLong crc = ::crc32(0L, Z_NULL, 0);
    crc = ::crc32(crc, reinterpret_cast<const Bytef *>(a.name.data()), a.name.size());
    const int32_t dtype = a.data.dtype;
    crc = ::crc32(crc, reinterpret_cast<const Bytef *>(&dtype), sizeof(dtype));
    crc = ::crc32(crc, reinterpret_cast<const Bytef *>(a.data.shape.data()),
                  a.data.shape.size() * sizeof(int64_t));
    // zlib takes a 32-bit length: the bytes in pieces.
    const uint8_t *p = a.data.data.data();
    for (size_t left = a.data.data.size(); left > 0;) {
      const size_t piece = std::min<size_t>(left, 1u << 30);
      crc = ::crc32(crc, p, static_cast<uInt>(piece));
      p += piece;
      left -= piece;
    }
    h = h * 0x100000001b3ULL ^ crc;
  }
  return h;
}

int64_t DataLoader::sampleAt(int64_t globalIndex) {
  int64_t epoch = globalIndex / samples_, pos = globalIndex % samples_;
  if (!shuffle_) return pos;
  if (epoch != permEpoch_) {
    perm_.resize(samples_);
    std::iota(perm_.begin(), perm_.end(), 0);
    // A fresh generator per epoch: the order depends only on (seed, epoch),
    // so a resumed run sees exactly the samples the original would have.
    std::mt19937_64 rng(seed_ * 1000003ULL + static_cast<uint64_t>(epoch));
    for (int64_t i = samples_ - 1; i > 0; --i) {
      std::uniform_int_distribution<int64_t> pick(0, i);
      std::swap(perm_[i], perm_[pick(rng)]);
    }
    permEpoch_ = epoch;
  }
  return perm_[pos];
}

std::map<std::string, HostArray> DataLoader::next() {
  std::map<std::string, HostArray> batch;
  int64_t first = cursor_ + rank_ * microBatch_;
  last_.clear();
  for (int64_t i = 0; i < microBatch_; ++i) last_.push_back(sampleAt(first + i));
  for (const Array &a : arrays_) {
    HostArray out;
    out.dtype = a.data.dtype;
    out.shape = a.data.shape;
    out.shape[0] = microBatch_;
    out.data.resize(a.sampleBytes * microBatch_);
    for (int64_t i = 0; i < microBatch_; ++i) {
      int64_t s = last_[i];
      std::memcpy(out.data.data() + i * a.sampleBytes, a.data.data.data() + s * a.sampleBytes,
                  a.sampleBytes);
    }
    batch[a.name] = std::move(out);
  }
  cursor_ += microBatch_ * worldSize_;
  return batch;
}

std::string DataLoader::describeLast() const {
  if (last_.empty()) return path_;
  bool run = true;
  for (size_t i = 1; i < last_.size(); ++i) run = run && last_[i] == last_[i - 1] + 1;
  if (run)
    return last_.size() == 1 ? absl::StrCat("sample ", last_[0], " of ", path_)
                             : absl::StrCat("samples ", last_.front(), "-", last_.back(), " of ", path_);
  return absl::StrCat("samples ", absl::StrJoin(last_, ", "), " of ", path_);
}

} // namespace ds::rt
