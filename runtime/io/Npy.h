// NumPy .npy and .npz files: the data format of ds-run's --inputs/--outputs
// (and of training data). Reading is strict: a malformed header, an
// unsupported dtype, fortran order, or a size that disagrees with the shape
// is an error naming the file (and the array inside an .npz).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/Tensor.h"
#include "runtime/plan/Status.h"

namespace ds::rt {

absl::StatusOr<HostArray> parseNpy(const uint8_t *data, size_t size, const std::string &what);
std::vector<uint8_t> serializeNpy(const HostArray &a);

absl::StatusOr<HostArray> readNpy(const std::string &path);

/// Whether an array read as `read` can fill a `wanted` buffer: the same
/// type, uint16 bits for bfloat16 (numpy has no bfloat16 dtype), and for
/// the narrow types (float8/float4, 4-/2-bit integers; numpy has none, and
/// ml_dtypes' arrays save as 1-byte void, read as u8) uint8 bit patterns,
/// or int8 values for the signed 4- and 2-bit integers.
bool npyHolds(DType read, DType wanted);
/// The bytes of `a` (npyHolds(a.dtype, wanted)) as a `wanted` buffer holds
/// them: a.data itself, or for a 4-/2-bit type its copy in `scratch` with
/// int8 values turned to their low bits. A value the type cannot hold is an
/// error naming its index.
absl::StatusOr<const uint8_t *> npyBytesAs(const HostArray &a, DType wanted,
                                           std::vector<uint8_t> &scratch);
absl::Status writeNpy(const std::string &path, const HostArray &a);

/// Arrays of an .npz in archive order, keyed by name (".npy" dropped).
absl::StatusOr<std::vector<std::pair<std::string, HostArray>>> readNpz(const std::string &path);
/// Writes an uncompressed .npz (what numpy.savez writes), atomically.
absl::Status writeNpz(const std::string &path,
                      const std::vector<std::pair<std::string, HostArray>> &arrays);

} // namespace ds::rt
