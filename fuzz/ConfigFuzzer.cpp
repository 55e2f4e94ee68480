// Fuzzes the ds_config.json reader: every input must end in a config or in
// an error naming the key, never a crash, a hang or an assert. The first
// byte picks the world size, so the batch arithmetic is fuzzed too.
#include <cstddef>
#include <cstdint>

#include "ds/Config/DeepSpeedConfig.h"
#include "llvm/Support/Error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > (1u << 20)) return 0;
  int64_t worldSize = 1 + data[0] % 8;
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);
  llvm::Expected<mlir::ds::TrainingConfig> config =
      mlir::ds::parseDeepSpeedConfig(text, "fuzz.json", worldSize);
  if (!config) {
    llvm::consumeError(config.takeError());
    return 0;
  }
  // A config that parses is consistent: DeepSpeed's batch identity holds.
  if (config->trainBatchSize !=
      config->microBatchSize * config->gradientAccumulationSteps * worldSize)
    __builtin_trap();
  return 0;
}
