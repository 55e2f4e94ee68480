// Checkpoints: a directory per step with every state buffer (parameters,
// optimizer moments, ...) and where the run was. Saves are atomic: written
// under a temporary name, fsynced, renamed into place, and only then made
// current by rewriting `latest` (the commit marker, written last). Older
// checkpoints are deleted only after the new one commits.
#pragma once

#include <map>
#include <string>

#include "runtime/exec/Session.h"

namespace ds::rt {

struct CheckpointOptions {
  int keep = 2; // committed checkpoints to keep
  /// ZeRO: every rank of `comm` holds different state and saves its own
  /// state.rank<R>.npz into the one checkpoint, which rank 0 commits only
  /// when every rank's file is written and synced. Without it, the caller
  /// (rank 0) writes state.npz.
  Comm *perRank = nullptr;
};

absl::Status saveCheckpoint(const std::string &dir, const ds::plan::CheckpointMeta &meta,
                            Session &session, const CheckpointOptions &opts = {});

/// DS_TEST_ABORT_DURING_CHECKPOINT=N in the environment makes the save of
/// step N exit abruptly halfway (the crash-during-save test).
///
/// Held for a training run that checkpoints: `dir` exists and is writable
/// (checked at the start, not at the first save), and no other run writes
/// checkpoints there (an flock on `dir`/.ds-run.lock, released when the
/// process ends however it ends). Rank 0 takes it; every rank of `comm`
/// learns whether it got it.
class CheckpointLock {
public:
  static absl::StatusOr<std::unique_ptr<CheckpointLock>> acquire(const std::string &dir,
                                                                 Comm &comm);
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;

  /// A run that starts from step 0 (no --resume) into a directory holding
  /// an earlier run's checkpoints is refused: its saves would mix with
  /// them and move `latest` back, out of --resume's reach.
  absl::Status checkNoEarlierRun(const std::string &dir, Comm &comm) const;

  /// Every rank's `dir` is rank 0's directory (ranks save one checkpoint
  /// together, each writing its file into it): each reads the lock file's
  /// token rank 0 wrote. Other paths to one shared directory pass.
  absl::Status checkSharedByRanks(const std::string &dir, Comm &comm) const;

private:
  CheckpointLock() = default;
  int fd_ = -1;
  uint64_t token_ = 0; // random, in the lock file after the pid
};

/// Loads the checkpoint `latest` names into the session's state buffers,
/// after checking every state file's size and CRC-32 against its metadata
/// (and each tensor's zip CRC as it is read): a damaged checkpoint is an
/// error naming the file (and tensor). With `fallback`, the newest older
/// checkpoint that is intact is loaded instead, with a note.
/// NotFound when the directory has no committed checkpoint.
absl::StatusOr<ds::plan::CheckpointMeta> loadLatestCheckpoint(const std::string &dir,
                                                              Session &session,
                                                              bool fallback = false);

/// The latest checkpoint in `dir` as whole tensors by state name, whatever
/// world size and ZeRO stage saved it: partitioned buffers are joined from
/// every rank's block (padding dropped) and given their whole shape, as
/// DeepSpeed's zero_to_fp32 does. Needs no session or communicator, so one
/// process consolidates a checkpoint of any number of ranks.
absl::StatusOr<std::map<std::string, HostArray>>
consolidateLatestCheckpoint(const std::string &dir, const ds::plan::Plan &plan,
                            ds::plan::CheckpointMeta *meta = nullptr);

} // namespace ds::rt
