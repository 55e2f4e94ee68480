#include "runtime/plan/DType.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ds::rt {

size_t dtypeSize(DType t) {
  switch (t) {
  case plan::F32: return 4;
  case plan::F16: return 2;
  case plan::BF16: return 2;
  case plan::F64: return 8;
  case plan::I8: return 1;
  case plan::I16: return 2;
  case plan::I32: return 4;
  case plan::I64: return 8;
  case plan::U8: return 1;
  case plan::U16: return 2;
  case plan::U32: return 4;
  case plan::U64: return 8;
  case plan::BOOL: return 1;
  case plan::F8E4M3FN:
  case plan::F8E4M3FNUZ:
  case plan::F8E5M2:
  case plan::F8E5M2FNUZ:
  case plan::F8E8M0:
  case plan::F4E2M1:
  case plan::I4:
  case plan::U4:
  case plan::I2:
  case plan::U2: return 1; // one element per byte
  default: return 0;
  }
}

std::string dtypeName(DType t) {
  switch (t) {
  case plan::F32: return "f32";
  case plan::F16: return "f16";
  case plan::BF16: return "bf16";
  case plan::F64: return "f64";
  case plan::I8: return "i8";
  case plan::I16: return "i16";
  case plan::I32: return "i32";
  case plan::I64: return "i64";
  case plan::U8: return "u8";
  case plan::U16: return "u16";
  case plan::U32: return "u32";
  case plan::U64: return "u64";
  case plan::BOOL: return "bool";
  case plan::F8E4M3FN: return "f8e4m3fn";
  case plan::F8E4M3FNUZ: return "f8e4m3fnuz";
  case plan::F8E5M2: return "f8e5m2";
  case plan::F8E5M2FNUZ: return "f8e5m2fnuz";
  case plan::F8E8M0: return "f8e8m0";
  case plan::F4E2M1: return "f4e2m1";
  case plan::I4: return "i4";
  case plan::U4: return "u4";
  case plan::I2: return "i2";
  case plan::U2: return "u2";
  default: return absl::StrCat("dtype#", static_cast<int>(t));
  }
}

absl::StatusOr<int64_t> checkedElementCount(const std::vector<int64_t> &shape) {
  if (shape.size() > kMaxRank)
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", shape.size(), " exceeds the limit of ", kMaxRank));
  constexpr int64_t kLimit = int64_t(1) << 62;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("negative dimension in shape [", shapeToString(shape), "]"));
    if (d != 0 && n > kLimit / d)
      return absl::InvalidArgumentError(absl::StrCat(
          "element count of shape [", shapeToString(shape), "] overflows"));
    n *= d;
  }
  return n;
}

absl::StatusOr<uint64_t> checkedByteSize(const std::vector<int64_t> &shape,
                                         DType t) {
  size_t es = dtypeSize(t);
  if (es == 0)
    return absl::InvalidArgumentError(
        absl::StrCat("unknown element type ", static_cast<int>(t)));
  auto n = checkedElementCount(shape);
  if (!n.ok())
    return n.status();
  if (static_cast<uint64_t>(*n) > (uint64_t(1) << 62) / es)
    return absl::InvalidArgumentError("byte size overflows");
  return static_cast<uint64_t>(*n) * es;
}

bool isNarrowDType(DType t) { return t >= plan::F8E4M3FN && t <= plan::U2; }

std::string shapeToString(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  return absl::StrJoin(shape, "x");
}

} // namespace ds::rt
