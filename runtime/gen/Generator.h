// The generation loop over a plan that ds-opt --generate compiled: requests
// (a prompt, how many tokens to add, how to pick them) run in the plan's
// batch of cache slots. A slot's prompt goes through the prefill program a
// chunk at a time, then the decode program adds one token per step; a
// finished request's slot takes the next waiting one at once, so the batch
// stays full (continuous batching, as DeepSpeed-FastGen does), and rows
// still reading their prompt ride along in the same steps as rows that
// decode.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/exec/Session.h"
#include "runtime/gen/Sampling.h"

namespace ds::rt::gen {

struct Request {
  std::vector<int64_t> prompt;
  int64_t maxNewTokens = 0;
  SamplingOptions sampling;
  std::vector<int64_t> stopTokens; // generation ends after producing one of these
  uint64_t seed = 0;               // the request's draws: (seed, its index)
};

struct Result {
  std::vector<int64_t> tokens; // generated, a stop token included
  /// "stop" (a stop token), "length" (max new tokens) or "max_tokens" (the
  /// sequence filled the plan's cache, ds-opt --max-tokens).
  std::string finish;
  double ttftMs = 0;  // from the run's start to the request's first token
  double totalMs = 0; // from the run's start to its last token
};

struct RunStats {
  double wallMs = 0;
  int64_t generated = 0;      // tokens, all requests
  double lastFirstTokenMs = 0; // when the last request of the first wave had its first token
  int64_t prefillSteps = 0, decodeSteps = 0;
};

class Generator {
public:
  /// The plan must be a generation plan (ds-opt --generate).
  static absl::StatusOr<std::unique_ptr<Generator>> create(Session &session);

  int64_t batch() const { return g_.batch(); }
  int64_t maxTokens() const { return g_.max_tokens(); }
  int64_t vocab() const { return g_.vocab(); }

  /// A request the plan can serve: a prompt of 1..max_tokens ids in the
  /// vocabulary; errors name `where` (the request).
  absl::Status check(const Request &r, const std::string &where) const;

  /// Runs `requests`, `batch()` at a time in order of their index; `done`
  /// is called for each as it finishes (its index and result).
  absl::Status run(const std::vector<Request> &requests,
                   const std::function<absl::Status(size_t, const Result &)> &done,
                   RunStats *stats = nullptr);

private:
  Generator(Session &s, const plan::Generation &g) : session_(s), g_(g) {}
  Session &session_;
  plan::Generation g_;
};

} // namespace ds::rt::gen
