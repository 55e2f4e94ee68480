// ds-run on a generation plan (ds-opt --generate): prompts in, sequences out.
//
//   ds-run lm.dsplan --prompt prompts.npz --max-new-tokens 64 --outputs out.npz
//   ds-run lm.dsplan --prompt prompts.npz --max-new-tokens 64 --temperature 0.8 --top-p 0.9 --seed 1
//   ds-run lm.dsplan --prompt prompts.npz --max-new-tokens 64 --benchmark 5
#include "tools/ds-run/GenerateCommand.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/gen/Generator.h"
#include "runtime/io/Files.h"
#include "runtime/io/Npy.h"
#include "runtime/proto/requests.pb.h"

ABSL_FLAG(std::string, requests, "",
          "generate: a JSONL file of requests, one a line: {\"prompt\": [ids], \"max_new_tokens\": "
          "N, \"temperature\", \"top_k\", \"top_p\", \"repetition_penalty\", \"stop\": [ids], "
          "\"seed\", \"id\"} (runtime/proto/requests.proto); the plan's batch serves them, a "
          "finished request's slot taking the next; each result is a line of --outputs (or "
          "stdout) as it finishes");
ABSL_FLAG(std::string, prompt, "",
          "generate: an .npz with input_ids [batch, length] (int64 or int32) and optionally "
          "attention_mask [batch, length] (1 for the prompt's tokens, 0 for padding, left or "
          "right); --outputs gets sequences [batch, length + max_new_tokens]");
ABSL_FLAG(int64_t, max_new_tokens, 0, "generate: tokens to add to each prompt");
ABSL_FLAG(double, temperature, 0.0,
          "generate: sample from softmax(logits / temperature) (0: greedy, the default)");
ABSL_FLAG(int64_t, top_k, 0, "generate: sample among the k likeliest tokens (0: all)");
ABSL_FLAG(double, top_p, 1.0,
          "generate: sample among the likeliest tokens whose probability reaches p");
ABSL_FLAG(double, repetition_penalty, 1.0,
          "generate: divide (multiply, if negative) the logits of tokens already in the "
          "sequence by this (Hugging Face's repetition_penalty)");
ABSL_FLAG(std::string, stop_tokens, "",
          "generate: comma-separated token ids that end a sequence (an EOS id)");
ABSL_FLAG(int64_t, pad_token, -1,
          "generate: id written after a sequence ends in --outputs (default: the first stop "
          "token, else 0)");

ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, outputs);
ABSL_DECLARE_FLAG(int, benchmark);

namespace ds::rt {
namespace {

/// The prompt .npz's arrays as int64 [batch, length].
absl::StatusOr<HostArray> idsArray(const std::string &path, const std::string &name,
                                   const HostArray &a) {
  if (a.shape.size() != 2)
    return absl::InvalidArgumentError(absl::StrCat("--prompt ", path, ": ", name,
                                                   " must be [batch, length], got [",
                                                   shapeToString(a.shape), "]"));
  HostArray out;
  out.dtype = plan::I64;
  out.shape = a.shape;
  out.data.resize(static_cast<size_t>(a.numel()) * 8);
  int64_t *dst = reinterpret_cast<int64_t *>(out.data.data());
  for (int64_t i = 0; i < a.numel(); ++i) {
    switch (a.dtype) {
    case plan::I64: std::memcpy(dst + i, a.data.data() + 8 * i, 8); break;
    case plan::I32: {
      int32_t x;
      std::memcpy(&x, a.data.data() + 4 * i, 4);
      dst[i] = x;
      break;
    }
    case plan::BOOL:
    case plan::U8:
    case plan::I8: dst[i] = a.data[i]; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("--prompt ", path, ": ", name,
                                                     " must hold integers, got ",
                                                     dtypeName(a.dtype)));
    }
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> tokenList(const std::string &flag, const std::string &text) {
  std::vector<int64_t> ids;
  if (text.empty()) return ids;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    int64_t id;
    if (!absl::SimpleAtoi(piece, &id) || id < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": expected comma-separated token ids >= 0, got '", piece, "'"));
    ids.push_back(id);
  }
  return ids;
}

/// The request every prompt starts from: --max-new-tokens, the sampling
/// flags, --stop-tokens, --seed.
absl::StatusOr<gen::Request> flagRequest() {
  gen::Request proto;
  proto.maxNewTokens = absl::GetFlag(FLAGS_max_new_tokens);
  const double temperature = absl::GetFlag(FLAGS_temperature);
  proto.sampling.sample = temperature > 0 || absl::GetFlag(FLAGS_top_k) > 0 ||
                          absl::GetFlag(FLAGS_top_p) < 1.0;
  proto.sampling.temperature = temperature > 0 ? temperature : 1.0;
  proto.sampling.topK = absl::GetFlag(FLAGS_top_k);
  proto.sampling.topP = absl::GetFlag(FLAGS_top_p);
  proto.sampling.repetitionPenalty = absl::GetFlag(FLAGS_repetition_penalty);
  proto.seed = absl::GetFlag(FLAGS_seed);
  DS_ASSIGN_OR_RETURN(proto.stopTokens,
                      tokenList("--stop-tokens", absl::GetFlag(FLAGS_stop_tokens)));
  return proto;
}

struct Prompts {
  HostArray ids;                     // as given, [batch, length]
  std::vector<gen::Request> requests;
};

absl::StatusOr<Prompts> readPrompts(const std::string &path, const gen::Generator &g) {
  DS_ASSIGN_OR_RETURN(auto arrays, readNpz(path));
  Prompts p;
  std::optional<HostArray> mask;
  for (auto &[name, a] : arrays) {
    if (name == "input_ids") {
      DS_ASSIGN_OR_RETURN(p.ids, idsArray(path, name, a));
    } else if (name == "attention_mask") {
      DS_ASSIGN_OR_RETURN(mask, idsArray(path, name, a));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--prompt ", path, ": unknown array '", name, "' (it holds input_ids and optionally "
          "attention_mask)"));
    }
  }
  if (p.ids.shape.empty())
    return absl::InvalidArgumentError(absl::StrCat("--prompt ", path, ": no input_ids array"));
  if (mask && mask->shape != p.ids.shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "--prompt ", path, ": attention_mask [", shapeToString(mask->shape),
        "] differs from input_ids [", shapeToString(p.ids.shape), "]"));
  DS_ASSIGN_OR_RETURN(gen::Request proto, flagRequest());
  const int64_t rows = p.ids.shape[0], width = p.ids.shape[1];
  const int64_t *ids = reinterpret_cast<const int64_t *>(p.ids.data.data());
  const int64_t *m = mask ? reinterpret_cast<const int64_t *>(mask->data.data()) : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    gen::Request req = proto;
    for (int64_t c = 0; c < width; ++c) {
      if (m && m[r * width + c] != 0 && m[r * width + c] != 1)
        return absl::InvalidArgumentError(absl::StrCat("--prompt ", path, ": attention_mask[",
                                                       r, ", ", c, "] is ", m[r * width + c],
                                                       "; it holds 0 or 1"));
      if (!m || m[r * width + c]) req.prompt.push_back(ids[r * width + c]);
    }
    DS_RETURN_IF_ERROR(g.check(req, absl::StrCat("--prompt ", path, ": row ", r)));
    p.requests.push_back(std::move(req));
  }
  return p;
}

/// --requests: one request a line (blank lines skipped), the flags filling
/// what a line leaves out.
absl::StatusOr<std::vector<std::pair<std::string, gen::Request>>>
readRequests(const std::string &path, const gen::Generator &g) {
  DS_ASSIGN_OR_RETURN(std::string text, readRegularFile(path, uint64_t(1) << 30));
  DS_ASSIGN_OR_RETURN(gen::Request defaults, flagRequest());
  std::vector<std::pair<std::string, gen::Request>> out;
  int64_t lineNo = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++lineNo;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::string where = absl::StrCat("--requests ", path, ":", lineNo);
    ds::requests::GenerationRequest r;
    auto st = google::protobuf::util::JsonStringToMessage(std::string(line), &r);
    if (!st.ok())
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", st.ToString()));
    gen::Request req = defaults;
    req.prompt.assign(r.prompt().begin(), r.prompt().end());
    if (r.max_new_tokens() != 0) req.maxNewTokens = r.max_new_tokens();
    if (r.has_temperature()) {
      if (r.temperature() < 0) return absl::InvalidArgumentError(where + ": temperature must be >= 0");
      req.sampling.temperature = r.temperature() > 0 ? r.temperature() : 1.0;
      req.sampling.sample = r.temperature() > 0;
    }
    if (r.has_top_k()) req.sampling.topK = r.top_k(), req.sampling.sample |= r.top_k() > 0;
    if (r.has_top_p()) req.sampling.topP = r.top_p(), req.sampling.sample |= r.top_p() < 1.0;
    if (r.has_repetition_penalty()) req.sampling.repetitionPenalty = r.repetition_penalty();
    if (r.stop_size()) req.stopTokens.assign(r.stop().begin(), r.stop().end());
    if (r.has_seed()) req.seed = r.seed();
    DS_RETURN_IF_ERROR(g.check(req, where));
    out.push_back({r.id().empty() ? std::to_string(out.size()) : r.id(), std::move(req)});
  }
  if (out.empty()) return absl::InvalidArgumentError("--requests " + path + " holds no request");
  return out;
}

/// Generates --requests, each result a JSON line as it finishes.
absl::Status serveRequests(gen::Generator &g, Session &session) {
  const std::string path = absl::GetFlag(FLAGS_requests);
  DS_ASSIGN_OR_RETURN(auto named, readRequests(path, g));
  std::vector<gen::Request> requests;
  for (auto &[id, r] : named) requests.push_back(r);
  const std::string outPath = absl::GetFlag(FLAGS_outputs);
  const bool rank0 = session.comm().rank() == 0;
  std::FILE *out = stdout;
  if (rank0 && !outPath.empty()) {
    out = std::fopen(outPath.c_str(), "w");
    if (!out)
      return absl::InvalidArgumentError(
          absl::StrCat("--outputs ", outPath, ": ", std::strerror(errno)));
  }
  gen::RunStats stats;
  absl::Status st = g.run(requests, [&](size_t i, const gen::Result &res) -> absl::Status {
    if (!rank0) return absl::OkStatus();
    ds::requests::GenerationResult r;
    r.set_id(named[i].first);
    r.set_index(static_cast<int32_t>(i));
    for (int64_t t : res.tokens) r.add_tokens(static_cast<int32_t>(t));
    r.set_finish_reason(res.finish);
    r.set_ttft_ms(res.ttftMs);
    r.set_total_ms(res.totalMs);
    std::string line;
    google::protobuf::util::JsonPrintOptions o;
    o.preserve_proto_field_names = true;
    o.always_print_primitive_fields = true;
    if (!google::protobuf::util::MessageToJsonString(r, &line, o).ok())
      return absl::InternalError("cannot write a result as JSON");
    if (std::fprintf(out, "%s\n", line.c_str()) < 0 || std::fflush(out) != 0)
      return absl::InternalError(absl::StrCat("writing results: ", std::strerror(errno)));
    return absl::OkStatus();
  }, &stats);
  if (out != stdout && std::fclose(out) != 0 && st.ok())
    st = absl::InternalError(absl::StrCat("--outputs ", outPath, ": ", std::strerror(errno)));
  DS_RETURN_IF_ERROR(st);
  if (rank0)
    std::fprintf(out == stdout ? stderr : stdout,
                 "{\"requests\": %zu, \"tokens\": %lld, \"wall_ms\": %.1f, \"tokens_per_s\": %.2f, "
                 "\"batch\": %lld}\n",
                 requests.size(), static_cast<long long>(stats.generated), stats.wallMs,
                 stats.generated / (stats.wallMs / 1e3), static_cast<long long>(g.batch()));
  return absl::OkStatus();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

absl::Status generateCommand(Session &session) {
  DS_ASSIGN_OR_RETURN(std::unique_ptr<gen::Generator> g, gen::Generator::create(session));
  const std::string path = absl::GetFlag(FLAGS_prompt);
  if (!absl::GetFlag(FLAGS_requests).empty()) {
    if (!path.empty()) return absl::InvalidArgumentError("--prompt and --requests exclude each other");
    if (absl::GetFlag(FLAGS_benchmark) != 0)
      return absl::InvalidArgumentError("--benchmark times --prompt; --requests reports its tokens/s");
    return serveRequests(*g, session);
  }
  if (path.empty())
    return absl::InvalidArgumentError(
        "this is a generation plan: give --prompt prompts.npz (input_ids [batch, length]) and "
        "--max-new-tokens N, or --requests FILE.jsonl");
  if (absl::GetFlag(FLAGS_max_new_tokens) < 1)
    return absl::InvalidArgumentError("--max-new-tokens N (N >= 1) is needed with --prompt");
  if (absl::GetFlag(FLAGS_temperature) < 0)
    return absl::InvalidArgumentError("--temperature must be >= 0 (0: greedy)");
  DS_ASSIGN_OR_RETURN(Prompts prompts, readPrompts(path, *g));
  const int64_t rows = prompts.ids.shape[0], width = prompts.ids.shape[1];
  const int64_t maxNew = absl::GetFlag(FLAGS_max_new_tokens);
  std::vector<gen::Result> results(static_cast<size_t>(rows));
  auto collect = [&](size_t i, const gen::Result &r) {
    results[i] = r;
    return absl::OkStatus();
  };
  gen::RunStats stats;
  if (int iters = absl::GetFlag(FLAGS_benchmark); iters > 0) {
    DS_RETURN_IF_ERROR(g->run(prompts.requests, collect)); // warm-up
    std::vector<double> ttft, decode, total;
    for (int it = 0; it < iters; ++it) {
      DS_RETURN_IF_ERROR(g->run(prompts.requests, collect, &stats));
      double first = 0;
      for (const gen::Result &r : results) first += r.ttftMs;
      ttft.push_back(first / rows);
      // Tokens after each sequence's first, over the time after the last
      // first token (the batch's decode phase).
      const double decodeMs = stats.wallMs - stats.lastFirstTokenMs;
      if (decodeMs > 0) decode.push_back((stats.generated - rows) / (decodeMs / 1e3));
      total.push_back(stats.generated / (stats.wallMs / 1e3));
    }
    if (session.comm().rank() == 0) // tensor-parallel ranks time the same steps
      std::printf("{\"runs\": %d, \"batch\": %lld, \"sequences\": %lld, \"max_new_tokens\": %lld, "
                "\"ttft_ms\": %.3f, \"decode_tokens_per_s\": %.2f, \"tokens_per_s\": %.2f}\n",
                iters, static_cast<long long>(g->batch()), static_cast<long long>(rows),
                static_cast<long long>(maxNew), median(ttft), median(decode), median(total));
  } else {
    DS_RETURN_IF_ERROR(g->run(prompts.requests, collect, &stats));
  }
  std::vector<int64_t> stops;
  DS_ASSIGN_OR_RETURN(stops, tokenList("--stop-tokens", absl::GetFlag(FLAGS_stop_tokens)));
  int64_t pad = absl::GetFlag(FLAGS_pad_token);
  if (pad < 0) pad = stops.empty() ? 0 : stops.front();
  HostArray seq;
  seq.dtype = plan::I64;
  seq.shape = {rows, width + maxNew};
  seq.data.resize(static_cast<size_t>(rows * (width + maxNew)) * 8);
  HostArray counts;
  counts.dtype = plan::I64;
  counts.shape = {rows};
  counts.data.resize(static_cast<size_t>(rows) * 8);
  int64_t *out = reinterpret_cast<int64_t *>(seq.data.data());
  const int64_t *in = reinterpret_cast<const int64_t *>(prompts.ids.data.data());
  bool full = false;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int64_t> &t = results[r].tokens;
    std::copy_n(in + r * width, width, out + r * (width + maxNew));
    for (int64_t c = 0; c < maxNew; ++c)
      out[r * (width + maxNew) + width + c] = c < static_cast<int64_t>(t.size()) ? t[c] : pad;
    const int64_t n = static_cast<int64_t>(t.size());
    std::memcpy(counts.data.data() + 8 * r, &n, 8);
    full |= results[r].finish == "max_tokens";
  }
  if (full && session.comm().rank() == 0)
    std::fprintf(stderr, "ds-run: warning: a sequence filled the plan's KV cache (%lld tokens, "
                         "ds-opt --max-tokens) before --max-new-tokens\n",
                 static_cast<long long>(g->maxTokens()));
  if (session.comm().rank() != 0) return absl::OkStatus();
  const std::string outPath = absl::GetFlag(FLAGS_outputs);
  if (outPath.empty()) {
    if (absl::GetFlag(FLAGS_benchmark) == 0)
      for (int64_t r = 0; r < rows; ++r) {
        std::printf("%lld:", static_cast<long long>(r));
        for (int64_t tok : results[r].tokens) std::printf(" %lld", static_cast<long long>(tok));
        std::printf("\n");
      }
    return absl::OkStatus();
  }
  return writeNpz(outPath, {{"sequences", std::move(seq)}, {"new_tokens", std::move(counts)}});
}

bool generationFlagsGiven() {
  return !absl::GetFlag(FLAGS_prompt).empty() || !absl::GetFlag(FLAGS_requests).empty() ||
         absl::GetFlag(FLAGS_max_new_tokens) != 0 ||
         absl::GetFlag(FLAGS_temperature) != 0 || absl::GetFlag(FLAGS_top_k) != 0 ||
         absl::GetFlag(FLAGS_top_p) != 1.0 || absl::GetFlag(FLAGS_repetition_penalty) != 1.0 ||
         !absl::GetFlag(FLAGS_stop_tokens).empty() || absl::GetFlag(FLAGS_pad_token) != -1;
}

} // namespace ds::rt
