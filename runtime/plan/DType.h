// Element types shared by the plan, the kernels and the .npy reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/proto/plan.pb.h"

namespace ds::rt {

using plan::DType;

/// Bytes per element, or 0 for DTYPE_UNSPECIFIED / unknown values.
size_t dtypeSize(DType t);
/// Short lower-case name: "f32", "i64", "bool", ...
std::string dtypeName(DType t);

/// The float8/float4 and 4-/2-bit integer types (one element per byte).
bool isNarrowDType(DType t);

/// Product of `shape`, checked: negative dims, ranks over kMaxRank and
/// products over 2^62 are errors, never wrapped integers.
absl::StatusOr<int64_t> checkedElementCount(const std::vector<int64_t> &shape);
absl::StatusOr<uint64_t> checkedByteSize(const std::vector<int64_t> &shape,
                                         DType t);

/// "2x3x4" (or "scalar").
std::string shapeToString(const std::vector<int64_t> &shape);

constexpr size_t kMaxRank = 1024;

} // namespace ds::rt
