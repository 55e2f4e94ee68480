#include "runtime/plan/StateLayout.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace ds::rt {
namespace {

/// Rank r's coordinates on the mesh: row-major over the axes, the last
/// axis fastest (as ds-opt numbers ranks).
std::vector<int64_t> coordinates(const ds::plan::Mesh &mesh, int64_t r) {
  std::vector<int64_t> c(mesh.axes_size());
  for (int i = mesh.axes_size() - 1; i >= 0; --i) {
    int64_t n = std::max<int64_t>(1, mesh.axes(i).size());
    c[i] = r % n;
    r /= n;
  }
  return c;
}

/// The index of rank r's part of a tensor cut over `axes` (major to minor)
/// and the number of parts.
std::pair<int64_t, int64_t> partOf(const ds::plan::Mesh &mesh, int64_t r,
                                   const google::protobuf::RepeatedPtrField<std::string> &axes) {
  std::vector<int64_t> c = coordinates(mesh, r);
  int64_t index = 0, parts = 1;
  for (const std::string &a : axes)
    for (int i = 0; i < mesh.axes_size(); ++i)
      if (mesh.axes(i).name() == a) {
        index = index * mesh.axes(i).size() + c[i];
        parts *= mesh.axes(i).size();
      }
  return {index, parts};
}

/// Where rank r's tensor-parallel slice sits in the whole tensor: an offset
/// and an extent per dimension.
struct Box {
  std::vector<int64_t> offset, extent;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t e : extent) n *= e;
    return n;
  }
};

absl::StatusOr<Box> sliceOf(const ds::plan::Buffer &b, const ds::plan::Mesh &mesh, int64_t r) {
  Box box;
  box.extent = wholeShapeOf(b);
  box.offset.assign(box.extent.size(), 0);
  for (const auto &s : b.splits()) {
    if (s.dim() < 0 || s.dim() >= static_cast<int64_t>(box.extent.size()))
      return absl::DataLossError(absl::StrCat("state '", b.io_name(), "' splits dimension ",
                                              s.dim(), " of a rank-", box.extent.size(), " tensor"));
    auto [index, parts] = partOf(mesh, r, s.axes());
    if (parts <= 0 || box.extent[s.dim()] % parts)
      return absl::DataLossError(absl::StrCat("state '", b.io_name(), "': dimension ", s.dim(),
                                              " does not split into ", parts, " parts"));
    box.extent[s.dim()] /= parts;
    box.offset[s.dim()] = index * box.extent[s.dim()];
  }
  return box;
}

/// Copies the box between the whole tensor and a dense slice (toWhole:
/// slice -> whole), a contiguous run of the last dimension at a time.
void copyBox(const Box &box, const std::vector<int64_t> &whole, size_t es, uint8_t *wholeData,
             uint8_t *sliceData, bool toWhole) {
  const size_t rank = whole.size();
  if (rank == 0) {
    toWhole ? std::memcpy(wholeData, sliceData, es) : std::memcpy(sliceData, wholeData, es);
    return;
  }
  std::vector<int64_t> idx(rank, 0); // over the box's leading dimensions
  const size_t run = static_cast<size_t>(box.extent[rank - 1]) * es;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= box.extent[d];
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d)
      off = off * whole[d] + box.offset[d] + (d + 1 < rank ? idx[d] : 0);
    uint8_t *w = wholeData + static_cast<size_t>(off) * es;
    uint8_t *s = sliceData + static_cast<size_t>(row) * run;
    toWhole ? std::memcpy(w, s, run) : std::memcpy(s, w, run);
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      if (++idx[d] < box.extent[d]) break;
      idx[d] = 0;
    }
  }
}

/// ZeRO: the block rank r holds and how many blocks there are.
std::pair<int64_t, int64_t> blockOf(const ds::plan::Buffer &b, const ds::plan::Mesh &mesh,
                                    int64_t ranks, int64_t r) {
  for (const auto &a : mesh.axes())
    if (!b.partition_axis().empty() && a.name() == b.partition_axis()) {
      google::protobuf::RepeatedPtrField<std::string> axes;
      axes.Add(std::string(b.partition_axis()));
      return partOf(mesh, r, axes);
    }
  return {r, ranks};
}

int64_t product(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

} // namespace

int64_t blockIndexOf(const ds::plan::Buffer &b, const ds::plan::Mesh &mesh, int64_t ranks,
                     int64_t rank) {
  return blockOf(b, mesh, ranks, rank).first;
}

std::vector<int64_t> wholeShapeOf(const ds::plan::Buffer &b) {
  if (b.splits_size() && b.whole_shape_size())
    return {b.whole_shape().begin(), b.whole_shape().end()};
  if (b.partition_numel()) {
    if (b.partition_shape_size()) return {b.partition_shape().begin(), b.partition_shape().end()};
    return {static_cast<int64_t>(b.partition_numel())};
  }
  return {b.shape().begin(), b.shape().end()};
}

bool differsPerRank(const ds::plan::Buffer &b) {
  return b.partition_numel() > 0 || b.splits_size() > 0;
}

absl::StatusOr<HostArray>
assembleWhole(const ds::plan::Buffer &b, const ds::plan::Mesh &mesh, int64_t ranks,
              const std::function<const HostArray *(int64_t)> &part, const std::string &where) {
  const size_t es = dtypeSize(b.dtype());
  HostArray out;
  out.dtype = b.dtype();
  out.shape = wholeShapeOf(b);
  out.data.assign(static_cast<size_t>(product(out.shape)) * es, 0);
  const uint64_t partBytes = b.size_bytes();
  // Each distinct slice once: its blocks from whichever ranks hold them.
  struct Slice {
    Box box;
    std::vector<uint8_t> bytes;
    std::vector<bool> have;
  };
  std::map<std::vector<int64_t>, Slice> slices;
  for (int64_t r = 0; r < ranks; ++r) {
    auto box = sliceOf(b, mesh, r);
    if (!box.ok()) return box.status();
    Slice &s = slices[box->offset];
    auto [block, blocks] = b.partition_numel() ? blockOf(b, mesh, ranks, r)
                                               : std::pair<int64_t, int64_t>{0, 1};
    if (s.have.empty()) {
      s.box = *box;
      s.bytes.assign(static_cast<size_t>(partBytes * blocks), 0);
      s.have.assign(blocks, false);
    }
    if (s.have[block]) continue;
    const HostArray *a = part(r);
    if (!a)
      return absl::InvalidArgumentError(absl::StrCat(where, ": rank ", r, "'s state lacks '",
                                                     b.io_name(), "' (a checkpoint of another plan?)"));
    if (a->data.size() != partBytes)
      return absl::DataLossError(absl::StrCat(where, ": rank ", r, "'s '", b.io_name(), "' holds ",
                                              a->data.size(), " bytes where its layout has ",
                                              partBytes));
    std::memcpy(s.bytes.data() + block * partBytes, a->data.data(), partBytes);
    s.have[block] = true;
  }
  for (auto &[offset, s] : slices) {
    const uint64_t sliceBytes = static_cast<uint64_t>(s.box.numel()) * es;
    for (size_t i = 0; i < s.have.size(); ++i)
      if (!s.have[i] && i * partBytes < sliceBytes)
        return absl::DataLossError(absl::StrCat(where, ": no rank holds block ", i, " of '",
                                                b.io_name(), "'"));
    if (s.bytes.size() < sliceBytes)
      return absl::DataLossError(absl::StrCat(where, ": the blocks of '", b.io_name(),
                                              "' are smaller than its slice"));
    copyBox(s.box, out.shape, es, out.data.data(), s.bytes.data(), /*toWhole=*/true);
  }
  return out;
}

absl::StatusOr<HostArray> rankPart(const ds::plan::Buffer &b, const ds::plan::Mesh &mesh,
                                   int64_t ranks, int64_t rank, const HostArray &whole) {
  const size_t es = dtypeSize(b.dtype());
  const std::vector<int64_t> shape = wholeShapeOf(b);
  if (whole.data.size() != static_cast<size_t>(product(shape)) * es)
    return absl::InvalidArgumentError(absl::StrCat("state '", b.io_name(), "' holds ",
                                                   whole.data.size() / std::max<size_t>(1, es),
                                                   " elements, not ", product(shape)));
  auto box = sliceOf(b, mesh, rank);
  if (!box.ok()) return box.status();
  std::vector<uint8_t> slice(static_cast<size_t>(box->numel()) * es);
  copyBox(*box, shape, es, const_cast<uint8_t *>(whole.data.data()), slice.data(),
          /*toWhole=*/false);
  HostArray out;
  out.dtype = b.dtype();
  out.shape.assign(b.shape().begin(), b.shape().end());
  if (!b.partition_numel()) {
    out.data = std::move(slice);
  } else {
    auto [block, blocks] = blockOf(b, mesh, ranks, rank);
    out.data.assign(b.size_bytes(), 0); // the zero padding past the slice
    const uint64_t lo = block * b.size_bytes();
    if (lo < slice.size())
      std::memcpy(out.data.data(), slice.data() + lo,
                  std::min<uint64_t>(b.size_bytes(), slice.size() - lo));
  }
  if (out.data.size() != b.size_bytes())
    return absl::DataLossError(absl::StrCat("state '", b.io_name(), "': a rank's part holds ",
                                            out.data.size(), " bytes, not ", b.size_bytes()));
  return out;
}

absl::StatusOr<HostArray> joinLastAxis(const std::vector<HostArray> &parts,
                                       const std::string &what) {
  if (parts.empty() || parts[0].shape.empty())
    return absl::DataLossError(absl::StrCat("'", what, "' has no parts to join"));
  HostArray out;
  out.dtype = parts[0].dtype;
  out.shape = parts[0].shape;
  const size_t rank = out.shape.size();
  int64_t rows = 1, cols = 0;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= out.shape[d];
  for (const HostArray &a : parts) {
    if (a.shape.size() != rank || a.dtype != out.dtype ||
        !std::equal(a.shape.begin(), a.shape.end() - 1, out.shape.begin()))
      return absl::DataLossError(absl::StrCat("the parts of '", what, "' differ in shape or type"));
    cols += a.shape.back();
  }
  const size_t es = dtypeSize(out.dtype);
  out.data.assign(static_cast<size_t>(rows * cols) * es, 0);
  int64_t at = 0;
  for (const HostArray &a : parts) {
    const int64_t w = a.shape.back();
    if (a.data.size() != static_cast<size_t>(rows * w) * es)
      return absl::DataLossError(absl::StrCat("a part of '", what, "' holds the wrong byte count"));
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out.data.data() + (r * cols + at) * es, a.data.data() + r * w * es, w * es);
    at += w;
  }
  out.shape.back() = cols;
  return out;
}

absl::StatusOr<HostArray> lastAxisBlock(const HostArray &a, int64_t begin, int64_t size,
                                        const std::string &what) {
  if (a.shape.empty() || begin < 0 || size <= 0 || begin + size > a.shape.back())
    return absl::DataLossError(absl::StrCat("'", what, "' has no columns [", begin, ", ",
                                            begin + size, ")"));
  const size_t es = dtypeSize(a.dtype);
  const int64_t cols = a.shape.back(), rows = a.numel() / std::max<int64_t>(1, cols);
  HostArray out;
  out.dtype = a.dtype;
  out.shape = a.shape;
  out.shape.back() = size;
  out.data.resize(static_cast<size_t>(rows * size) * es);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data.data() + r * size * es, a.data.data() + (r * cols + begin) * es,
                size * es);
  return out;
}

std::optional<std::pair<std::string, int64_t>> splitPartName(const std::string &name) {
  const size_t hash = name.rfind('#');
  if (hash == std::string::npos || hash + 1 == name.size() || hash == 0) return std::nullopt;
  int64_t index = 0;
  for (size_t i = hash + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || index > (1 << 20)) return std::nullopt;
    index = index * 10 + (name[i] - '0');
  }
  return std::make_pair(name.substr(0, hash), index);
}

bool sameLayout(const ds::plan::Buffer &a, const ds::plan::Buffer &b) {
  if (a.dtype() != b.dtype() || a.size_bytes() != b.size_bytes() ||
      a.partition_numel() != b.partition_numel() || a.partition_axis() != b.partition_axis() ||
      wholeShapeOf(a) != wholeShapeOf(b) || a.splits_size() != b.splits_size())
    return false;
  for (int i = 0; i < a.splits_size(); ++i)
    if (a.splits(i).dim() != b.splits(i).dim() ||
        !std::equal(a.splits(i).axes().begin(), a.splits(i).axes().end(),
                    b.splits(i).axes().begin(), b.splits(i).axes().end()))
      return false;
  return true;
}

bool sameMesh(const ds::plan::Mesh &a, const ds::plan::Mesh &b) {
  if (a.axes_size() != b.axes_size()) return false;
  for (int i = 0; i < a.axes_size(); ++i)
    if (a.axes(i).name() != b.axes(i).name() || a.axes(i).size() != b.axes(i).size()) return false;
  return true;
}

void recordLayouts(const ds::plan::Plan &plan, ds::plan::CheckpointMeta *meta) {
  *meta->mutable_mesh() = plan.mesh();
  for (const auto &b : plan.buffers()) {
    if (b.kind() != ds::plan::Buffer::STATE) continue;
    ds::plan::Buffer *l = meta->add_layouts();
    l->set_kind(b.kind());
    l->set_io_name(b.io_name());
    l->set_dtype(b.dtype());
    *l->mutable_shape() = b.shape();
    l->set_size_bytes(b.size_bytes());
    l->set_partition_numel(b.partition_numel());
    *l->mutable_partition_shape() = b.partition_shape();
    l->set_partition_axis(b.partition_axis());
    *l->mutable_splits() = b.splits();
    *l->mutable_whole_shape() = b.whole_shape();
  }
}

} // namespace ds::rt
