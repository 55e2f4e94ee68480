#include "runtime/gen/Sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ds::rt::gen {

TokenRng::TokenRng(uint64_t seed, uint64_t request) {
  // SplitMix64 of the pair: nearby seeds and indices give unrelated streams.
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + request + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  engine_.seed(z ^ (z >> 31));
}

double TokenRng::uniform() {
  // 53 random bits: exactly representable, in [0, 1).
  return static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0);
}

int64_t nextToken(std::vector<float> &logits, const std::vector<int64_t> &history,
                  const SamplingOptions &o, TokenRng &rng) {
  const int64_t v = static_cast<int64_t>(logits.size());
  if (o.repetitionPenalty != 1.0) {
    // Each distinct token once: a logit below 0 is multiplied, above divided.
    std::vector<char> seen(static_cast<size_t>(v), 0);
    const float p = static_cast<float>(o.repetitionPenalty);
    for (int64_t t : history) {
      if (t < 0 || t >= v || seen[t]) continue;
      seen[t] = 1;
      logits[t] = logits[t] < 0 ? logits[t] * p : logits[t] / p;
    }
  }
  if (!o.sample) // the first maximum, as torch.argmax; NaN is never picked over a number
    return std::max_element(logits.begin(), logits.end(),
                            [](float a, float b) { return std::isnan(a) || (!std::isnan(b) && a < b); }) -
           logits.begin();
  const float invT = static_cast<float>(1.0 / o.temperature);
  for (float &x : logits) x *= invT;
  // Candidates by logit, best first (ties: lower id first).
  std::vector<int64_t> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = v;
  if (o.topK > 0 && o.topK < v) keep = o.topK;
  auto better = [&](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (keep < v) {
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), better);
    // Top-k keeps every token tied with the k-th, as HF's threshold does.
    const float kth = logits[order[keep - 1]];
    for (int64_t i = keep; i < v; ++i)
      if (logits[order[i]] >= kth) std::swap(order[keep++], order[i]);
  } else {
    std::sort(order.begin(), order.end(), better);
  }
  order.resize(static_cast<size_t>(keep));
  std::sort(order.begin(), order.end(), better);
  const float top = logits[order.front()];
  std::vector<double> probs(order.size());
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) sum += (probs[i] = std::exp(double(logits[order[i]]) - top));
  if (!(sum > 0) || !std::isfinite(sum)) return order.front();
  for (double &p : probs) p /= sum;
  if (o.topP < 1.0) {
    // The smallest prefix whose probability reaches top_p (at least one).
    double cum = 0;
    size_t n = 0;
    while (n < probs.size()) {
      cum += probs[n++];
      if (cum >= o.topP) break;
    }
    probs.resize(n), order.resize(n);
    sum = std::accumulate(probs.begin(), probs.end(), 0.0);
    for (double &p : probs) p /= sum;
  }
  double u = rng.uniform(), acc = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    acc += probs[i];
    if (u < acc) return order[i];
  }
  return order.back();
}

} // namespace ds::rt::gen
