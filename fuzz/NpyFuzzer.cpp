// Fuzzes the .npy reader (ds-run's --inputs and --data arrays, checkpoint
// state): any bytes end in an array or an error naming the file, and an
// array that parses writes back to bytes that parse to the same array.
#include <cstddef>
#include <cstdint>

#include "runtime/io/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (4u << 20)) return 0;
  auto a = ds::rt::parseNpy(data, size, "fuzz.npy");
  if (!a.ok()) return 0;
  std::vector<uint8_t> bytes = ds::rt::serializeNpy(*a);
  auto b = ds::rt::parseNpy(bytes.data(), bytes.size(), "round trip");
  if (!b.ok() || b->dtype != a->dtype || b->shape != a->shape || b->data != a->data)
    __builtin_trap();
  return 0;
}
