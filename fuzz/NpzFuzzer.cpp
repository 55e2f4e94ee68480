// Fuzzes the .npz reader (training data, --inputs, checkpoint state): the
// zip container through libzip, each entry's CRC-32, and the .npy inside.
// readNpz reads a path, so the bytes go to an in-memory file first.
#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/io/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (4u << 20)) return 0;
  static int fd = ::memfd_create("fuzz.npz", 0);
  if (fd < 0) return 0;
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    return 0;
  auto arrays = ds::rt::readNpz("/proc/self/fd/" + std::to_string(fd));
  (void)arrays;
  return 0;
}
