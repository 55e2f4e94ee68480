// Picking the next token from a row of logits, as Hugging Face's generate
// does: the repetition penalty first (over every token of the sequence so
// far, prompt included), then greedy argmax, or temperature, top-k and
// top-p (nucleus) filtering and a draw from the softmax. Draws come from
// each request's own seeded generator, so a request's tokens do not depend
// on what else is in the batch.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ds::rt::gen {

struct SamplingOptions {
  bool sample = false;          // false: greedy (argmax; the first of equal maxima)
  double temperature = 1.0;     // > 0
  int64_t topK = 0;             // 0: all
  double topP = 1.0;            // (0, 1]
  double repetitionPenalty = 1.0; // > 0; 1: none (HF's RepetitionPenaltyLogitsProcessor)
};

/// A request's random stream: std::mt19937_64 seeded from the run's seed and
/// the request's index.
class TokenRng {
public:
  TokenRng(uint64_t seed, uint64_t request);
  /// Uniform in [0, 1).
  double uniform();

private:
  std::mt19937_64 engine_;
};

/// The next token after `logits` (vocabulary size entries; modified in
/// place by the penalty and filters) given the tokens so far.
int64_t nextToken(std::vector<float> &logits, const std::vector<int64_t> &history,
                  const SamplingOptions &options, TokenRng &rng);

} // namespace ds::rt::gen
