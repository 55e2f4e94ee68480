#include "runtime/gen/Generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>

#include "absl/strings/str_cat.h"

namespace ds::rt::gen {

absl::StatusOr<std::unique_ptr<Generator>> Generator::create(Session &session) {
  const plan::Plan &p = session.plan().plan();
  if (!p.has_generation())
    return absl::InvalidArgumentError(absl::StrCat(
        "plan ", session.plan().path(),
        " is not a generation plan: compile the causal LM with ds-opt --generate"));
  const plan::Generation &g = p.generation();
  if (g.batch() < 1 || g.max_tokens() < 1 || g.chunk() < 1 || g.vocab() < 1 ||
      !session.program(g.prefill_program()) ||
      (!g.decode_program().empty() && !session.program(g.decode_program())))
    return absl::InvalidArgumentError(
        absl::StrCat("plan ", session.plan().path(), ": its generation section is malformed"));
  return std::unique_ptr<Generator>(new Generator(session, g));
}

absl::Status Generator::check(const Request &r, const std::string &where) const {
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  if (n == 0) return absl::InvalidArgumentError(where + ": the prompt is empty");
  if (n > g_.max_tokens())
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the prompt has ", n, " tokens, more than the ", g_.max_tokens(),
        " the plan's KV cache holds (ds-opt --max-tokens, DeepSpeed's max_out_tokens)"));
  for (int64_t i = 0; i < n; ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= g_.vocab())
      return absl::InvalidArgumentError(absl::StrCat(where, ": token ", i, " is ", r.prompt[i],
                                                     ", outside the vocabulary [0, ", g_.vocab(),
                                                     ")"));
  if (r.maxNewTokens < 1)
    return absl::InvalidArgumentError(where + ": max new tokens must be >= 1");
  const SamplingOptions &s = r.sampling;
  if (!(s.temperature > 0) || !std::isfinite(s.temperature))
    return absl::InvalidArgumentError(where + ": temperature must be > 0");
  if (!(s.topP > 0 && s.topP <= 1)) return absl::InvalidArgumentError(where + ": top_p must be in (0, 1]");
  if (s.topK < 0) return absl::InvalidArgumentError(where + ": top_k must be >= 0");
  if (!(s.repetitionPenalty > 0) || !std::isfinite(s.repetitionPenalty))
    return absl::InvalidArgumentError(where + ": repetition penalty must be > 0");
  return absl::OkStatus();
}

namespace {

/// A cache slot and the request in it.
struct Slot {
  int64_t request = -1;              // -1: free
  size_t fed = 0;                    // prompt tokens the cache holds
  std::vector<int64_t> history;      // prompt, then generated tokens
  size_t promptLength = 0;
  Result result;
  std::unique_ptr<TokenRng> rng;
  bool prefilling() const { return fed < promptLength; }
};

HostArray i64Array(std::vector<int64_t> shape, const std::vector<int64_t> &values) {
  HostArray a;
  a.dtype = plan::I64;
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(int64_t));
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

} // namespace

absl::Status Generator::run(const std::vector<Request> &requests,
                            const std::function<absl::Status(size_t, const Result &)> &done,
                            RunStats *stats) {
  const int64_t b = g_.batch(), m = g_.max_tokens(), v = g_.vocab();
  for (size_t i = 0; i < requests.size(); ++i)
    DS_RETURN_IF_ERROR(check(requests[i], absl::StrCat("request ", i)));
  const auto start = std::chrono::steady_clock::now();
  auto msSince = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  RunStats st;
  std::vector<Slot> slots(static_cast<size_t>(b));
  size_t next = 0, finished = 0;
  const size_t firstWave = std::min<size_t>(requests.size(), static_cast<size_t>(b));
  size_t firstWaveStarted = 0;
  // A prompt's rest this long or longer goes through the prefill program;
  // shorter rests ride along one token per decode step.
  const int64_t prefillFrom = std::max<int64_t>(2, g_.chunk() / 8);
  const std::string inputName = g_.input().empty() ? "input_ids" : g_.input();
  std::vector<float> row(static_cast<size_t>(v));
  while (finished < requests.size()) {
    for (Slot &s : slots) {
      if (s.request >= 0 || next == requests.size()) continue;
      const Request &r = requests[next];
      s.request = static_cast<int64_t>(next);
      s.fed = 0;
      s.history = r.prompt;
      s.promptLength = r.prompt.size();
      s.result = Result();
      s.rng = std::make_unique<TokenRng>(r.seed, next);
      ++next;
    }
    int64_t rest = 0;
    for (const Slot &s : slots)
      if (s.request >= 0) rest = std::max<int64_t>(rest, s.promptLength - s.fed);
    const bool prefill = g_.decode_program().empty() || rest >= prefillFrom;
    const int64_t t = prefill ? g_.chunk() : 1;
    std::vector<int64_t> ids(static_cast<size_t>(b * t), 0), positions(b, 0), lengths(b, 0),
        slotIds(b);
    for (int64_t i = 0; i < b; ++i) {
      slotIds[i] = i;
      const Slot &s = slots[i];
      if (s.request < 0) continue;
      if (s.prefilling()) {
        const int64_t n = std::min<int64_t>(t, s.promptLength - s.fed);
        std::copy_n(s.history.begin() + s.fed, n, ids.begin() + i * t);
        positions[i] = static_cast<int64_t>(s.fed);
        lengths[i] = n;
      } else { // the last token picked goes in at its position
        ids[i * t] = s.history.back();
        positions[i] = static_cast<int64_t>(s.history.size()) - 1;
        lengths[i] = 1;
      }
    }
    std::map<std::string, HostArray> inputs;
    inputs[inputName] = i64Array({b, t}, ids);
    inputs["positions"] = i64Array({b}, positions);
    inputs["lengths"] = i64Array({b}, lengths);
    inputs["slots"] = i64Array({b}, slotIds);
    DS_ASSIGN_OR_RETURN(NamedArrays outs,
                        session_.run(prefill ? g_.prefill_program() : g_.decode_program(), inputs));
    (prefill ? st.prefillSteps : st.decodeSteps) += 1;
    if (outs.size() != 1 || outs[0].second.dtype != plan::F32 ||
        outs[0].second.shape != std::vector<int64_t>{b, v})
      return absl::InternalError("the generation program's output is not logits [batch, vocab]");
    const float *logits = reinterpret_cast<const float *>(outs[0].second.data.data());
    std::vector<int64_t> picked(static_cast<size_t>(b), -1);
    for (int64_t i = 0; i < b; ++i) {
      Slot &s = slots[i];
      if (s.request < 0 || lengths[i] == 0) continue;
      if (s.prefilling()) {
        s.fed += static_cast<size_t>(lengths[i]);
        if (s.prefilling()) continue; // more prompt to read before a token
      }
      const Request &r = requests[static_cast<size_t>(s.request)];
      std::copy_n(logits + i * v, v, row.begin());
      picked[i] = nextToken(row, s.history, r.sampling, *s.rng);
    }
    // Tensor-parallel ranks feed the same tokens: rank 0's picks, whatever
    // the last bit of another rank's reduced logits.
    if (session_.comm().size() > 1)
      DS_RETURN_IF_ERROR(session_.comm().broadcast(picked.data(), b, plan::I64, 0));
    for (int64_t i = 0; i < b; ++i) {
      Slot &s = slots[i];
      if (picked[i] < 0) continue;
      const Request &r = requests[static_cast<size_t>(s.request)];
      const int64_t tok = picked[i];
      s.history.push_back(tok);
      s.result.tokens.push_back(tok);
      ++st.generated;
      const double now = msSince();
      if (s.result.tokens.size() == 1) {
        s.result.ttftMs = now;
        if (static_cast<size_t>(s.request) < firstWave && ++firstWaveStarted == firstWave)
          st.lastFirstTokenMs = now;
      }
      std::string finish;
      if (std::find(r.stopTokens.begin(), r.stopTokens.end(), tok) != r.stopTokens.end())
        finish = "stop";
      else if (static_cast<int64_t>(s.result.tokens.size()) >= r.maxNewTokens)
        finish = "length";
      else if (static_cast<int64_t>(s.history.size()) >= m) // no room to feed it back
        finish = "max_tokens";
      if (finish.empty()) continue;
      s.result.finish = finish;
      s.result.totalMs = now;
      DS_RETURN_IF_ERROR(done(static_cast<size_t>(s.request), s.result));
      s.request = -1;
      ++finished;
    }
  }
  st.wallMs = msSince();
  if (stats) *stats = st;
  return absl::OkStatus();
}

} // namespace ds::rt::gen
