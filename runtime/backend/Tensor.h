// A view of one buffer as a kernel sees it: element type, shape, pointer.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/plan/DType.h"

namespace ds::rt {

struct TensorView {
  DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  void *data = nullptr;
  int64_t numel = 0;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
  uint64_t bytes() const { return static_cast<uint64_t>(numel) * dtypeSize(dtype); }
};

/// An owned host array, as read from or written to .npy/.npz.
struct HostArray {
  DType dtype = plan::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  TensorView view() {
    return TensorView{dtype, shape, data.data(), numel()};
  }
};

} // namespace ds::rt
