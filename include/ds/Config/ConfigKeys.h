//===- ConfigKeys.h - every DeepSpeed config key and what ds does --------===//
//
// The table of DeepSpeed 0.19's ds_config.json keys the reader knows, each
// with what ds does with it (honoured, accepted without effect, refused),
// a sample value and a one-line note. docs/generated/config-keys.md is
// printed from it (ds-opt --print-config-keys), and checkConfigKeys()
// holds it to the reader: each sample is read with the documented outcome,
// and every key the reader asks for is in the table, so neither drifts.
//
//===----------------------------------------------------------------------===//
#ifndef DS_CONFIG_CONFIGKEYS_H
#define DS_CONFIG_CONFIGKEYS_H

#include <string>
#include <vector>

#include "llvm/ADT/ArrayRef.h"

namespace mlir::ds {

enum class KeyUse {
  Honoured, // ds does what DeepSpeed does with it
  Inert,    // accepted (and type-checked); changes nothing in ds, with why
  Refused,  // an error naming it (a feature not built yet), with what to use
};

struct ConfigKey {
  const char *path;    // dotted, as the user writes it
  KeyUse use;
  const char *sample;  // a JSON value for the check (a refused key's: one refused)
  const char *context; // JSON object merged into the check's config, or ""
  const char *note;    // what ds does with it, one line
};

/// Every key, in documentation order.
llvm::ArrayRef<ConfigKey> deepSpeedConfigKeys();

/// The table as markdown (docs/generated/config-keys.md).
std::string configKeysMarkdown();

/// The table against the reader; the problems found (empty: consistent).
std::vector<std::string> checkConfigKeys();

} // namespace mlir::ds

#endif // DS_CONFIG_CONFIGKEYS_H
