// Which plan and which model a run or a checkpoint belongs to, as 64-bit
// hashes: ranks must run the same plan, and a checkpoint resumes only into
// a plan of the same model (docs/security.md, "Checkpoints").
#pragma once

#include <cstdint>

#include <string>

#include "runtime/plan/Status.h"
#include "runtime/proto/plan.pb.h"

namespace ds::rt {

/// The plan message (programs, buffers, training settings; not the
/// weights, which carry their own checksums), serialized deterministically.
uint64_t planHash(const ds::plan::Plan &plan);

/// The model: its fingerprint (ds-opt's hash of the IR as imported), the
/// source ONNX graph a training plan carries, and each trained tensor's
/// name, dtype and whole shape. The same for every world
/// size and ZeRO stage of one model and precision.
uint64_t modelHash(const ds::plan::Plan &plan);
/// The model hash checkpoints written before tensor-parallel training
/// recorded (trained tensors in plan order, local shapes): still accepted.
uint64_t legacyModelHash(const ds::plan::Plan &plan);

class Comm;

/// FNV-1a over bytes, chainable: a stable 64-bit hash for agreement checks.
uint64_t fnv1a(const void *data, size_t n, uint64_t h = 1469598103934665603ULL);

/// Every rank's `mine` equal, or a FailedPrecondition on every rank whose
/// message says what differs (`what`, and this rank's `detail`). A no-op
/// on one rank.
absl::Status agreeAcrossRanks(Comm &comm, uint64_t mine, const std::string &what,
                              const std::string &detail);

} // namespace ds::rt
