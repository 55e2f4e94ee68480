# Generation (ds-opt --generate, ds-run --prompt) against Hugging Face's own
# generate(): GPT-2, Llama (GQA, RoPE) and Mistral (sliding window) exported
# by PyTorch 2's exporter with no cache inputs, and GPT-2 exported with its
# sequence fixed; greedy tokens must be Hugging Face's, prompt by prompt,
# whatever the batch (prompts of different lengths, left-padded), the
# prefill chunk, or the number of slots (continuous batching: more prompts
# than slots). test/E2E/generate/make_generate_exports.py made the files
# (CI has no PyTorch 2.x). Then sampling: seeded, reproducible, and top-k 1
# is greedy; and the errors a user meets.
# REQUIRES: compiler
# RUN: %python %s --workdir %t
import json
import os
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
from e2e import parse_args, run

args = parse_args()
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "generate")
os.makedirs(args.workdir, exist_ok=True)
prompts = os.path.join(here, "prompts.npz")
ids = np.load(prompts)["input_ids"]
mask = np.load(prompts)["attention_mask"]
width = ids.shape[1]


def compile_plan(model, name, *flags):
    plan = os.path.join(args.workdir, name + ".dsplan")
    run(["ds-opt", os.path.join(here, model + ".onnx"), "--generate", "-o", plan, *flags])
    return plan


def generate(plan, name, new, *flags, prompt=prompts):
    out = os.path.join(args.workdir, name + ".out.npz")
    run(["ds-run", plan, "--prompt", prompt, "--max-new-tokens", str(new), "--outputs", out,
         *flags])
    got = np.load(out)
    return got["sequences"], got["new_tokens"]


def check(what, seqs, counts, expected, new):
    if seqs.shape != (len(expected), width + new):
        sys.exit("%s: sequences have shape %s" % (what, seqs.shape))
    if not (seqs[:, :width] == ids[:len(expected)]).all():
        sys.exit("%s: the prompts are not the sequences' start" % what)
    for r, want in enumerate(expected):
        got = seqs[r, width:width + new].tolist()
        if counts[r] != new or got != want[:new]:
            sys.exit("%s: prompt %d: ds generated %s, Hugging Face %s" % (what, r, got, want[:new]))
    print("%s: %d prompts, %d tokens each, as Hugging Face" % (what, len(expected), new))


for model in ("gpt2", "llama", "mistral"):
    rec = json.load(open(os.path.join(here, model + ".json")))
    new, expected = rec["new_tokens"], rec["expected"]
    # All prompts at once, prompts read 4 tokens a step (the 11-token one
    # takes three prefill steps, the others ride along decoding).
    plan = compile_plan(model, model + "_b3", "--batch", "3", "--max-tokens", "40",
                        "--prefill-chunk", "4")
    check(model + " (batch 3, chunk 4)", *generate(plan, model + "_b3", new), expected, new)
    # Two slots for three prompts: the third starts when a slot frees.
    plan = compile_plan(model, model + "_b2", "--batch", "2", "--max-tokens", "48")
    check(model + " (2 slots, chunk 128)", *generate(plan, model + "_b2", new), expected, new)
    # The repetition penalty, as Hugging Face applies it.
    check(model + " (repetition penalty %g)" % rec["repetition_penalty"],
          *generate(plan, model + "_pen", new, "--repetition-penalty",
                    str(rec["repetition_penalty"])), rec["expected_penalized"], new)

# A model exported with its sequence fixed at 24: the cache holds 24
# tokens, and a sequence that fills it ends there (with a warning).
rec = json.load(open(os.path.join(here, "gpt2_static.json")))
plan = compile_plan("gpt2_static", "gpt2_static")  # one slot (the batch is fixed at 1)
seqs, counts = generate(plan, "gpt2_static", 13)
check("gpt2 exported at [1, 24], one slot", seqs, counts, rec["expected"], 13)
res = subprocess.run(["ds-run", plan, "--prompt", prompts, "--max-new-tokens", "16"],
                     capture_output=True, text=True)
if res.returncode != 0 or "filled the plan's KV cache (24 tokens" not in res.stderr:
    sys.exit("a sequence filling the cache: %s" % res.stderr)
res = subprocess.run(["ds-opt", os.path.join(here, "gpt2_static.onnx"), "--generate",
                      "--max-tokens", "64", "-o", os.path.join(args.workdir, "x.dsplan")],
                     capture_output=True, text=True)
if res.returncode == 0 or "exported for sequences of exactly 24 tokens" not in res.stderr:
    sys.exit("--max-tokens past a fixed sequence: %s" % res.stderr)

# Sampling: seeded and reproducible; top-k 1 is greedy; another seed draws
# other tokens.
rec = json.load(open(os.path.join(here, "llama.json")))
plan = compile_plan("llama", "llama_s", "--batch", "3", "--max-tokens", "40")
a = generate(plan, "s1", 20, "--temperature", "1.5", "--top-p", "0.95", "--seed", "1")[0]
b = generate(plan, "s1b", 20, "--temperature", "1.5", "--top-p", "0.95", "--seed", "1")[0]
c = generate(plan, "s2", 20, "--temperature", "1.5", "--top-p", "0.95", "--seed", "2")[0]
if not (a == b).all():
    sys.exit("sampling with one seed gave different tokens")
if (a == c).all():
    sys.exit("sampling with seeds 1 and 2 gave the same 60 tokens")
check("llama top-k 1", *generate(plan, "k1", 20, "--temperature", "0.7", "--top-k", "1",
                                 "--seed", "3"), rec["expected"], 20)
if (a[:, width:] == np.array(rec["expected"])).all():
    sys.exit("sampling at temperature 1.5 gave the greedy tokens")
# A stop token ends a sequence; --pad-token fills the rest.
stop = rec["expected"][0][3]
seqs, counts = generate(plan, "stop", 20, "--stop-tokens", str(stop), "--pad-token", "95")
for r, want in enumerate(rec["expected"]):
    n = want.index(stop) + 1 if stop in want else 20
    if counts[r] != n or seqs[r, width:width + n].tolist() != want[:n] or \
            (seqs[r, width + n:] != 95).any():
        sys.exit("stop token %d: row %d gave %s" % (stop, r, seqs[r, width:].tolist()))
print("sampling: seeded draws repeat, seeds differ, top-k 1 is greedy, stop tokens end rows")

# --requests: more requests than slots, each with its own length; every
# result streams out as its request ends, greedy ones with Hugging Face's
# tokens; the batch stays full (a finished slot takes the next request).
lines, want = [], {}
for i, (n, r) in enumerate([(20, 0), (3, 1), (9, 2), (1, 0), (14, 1)]):
    prompt = ids[r][mask[r] == 1].tolist()
    lines.append(json.dumps({"id": "req%d" % i, "prompt": prompt, "max_new_tokens": n}))
    want["req%d" % i] = rec["expected"][r][:n]
lines.insert(2, "")  # blank lines are skipped
lines.append(json.dumps({"prompt": ids[0][mask[0] == 1].tolist(), "max_new_tokens": 6,
                         "temperature": 1.5, "top_k": 5, "seed": 11}))
requests = os.path.join(args.workdir, "requests.jsonl")
open(requests, "w").write("\n".join(lines) + "\n")
slots2 = compile_plan("llama", "llama_r", "--batch", "2", "--max-tokens", "40")
results = os.path.join(args.workdir, "results.jsonl")
summary = run(["ds-run", slots2, "--requests", requests, "--outputs", results])
got = [json.loads(l) for l in open(results)]
if sorted(r["index"] for r in got) != list(range(6)):
    sys.exit("--requests: results for %s" % [r["index"] for r in got])
for r in got:
    if r["id"] in want and r["tokens"] != want[r["id"]]:
        sys.exit("--requests %s: ds generated %s, Hugging Face %s" % (r["id"], r["tokens"],
                                                                    want[r["id"]]))
sampled = [r for r in got if r["id"] == "5"]
if len(sampled) != 1 or len(sampled[0]["tokens"]) != 6 or sampled[0]["finish_reason"] != "length":
    sys.exit("--requests: the sampled request gave %s" % sampled)
# Short requests finish first: req3 (1 token) before req0 (20).
order = [r["id"] for r in got]
if order.index("req3") > order.index("req0"):
    sys.exit("--requests: results not in the order requests finished: %s" % order)
stats = json.loads(summary.strip().splitlines()[-1])
if stats["requests"] != 6 or stats["tokens"] != 20 + 3 + 9 + 1 + 14 + 6 or stats["batch"] != 2:
    sys.exit("--requests summary: %s" % stats)
print("--requests: 6 requests through 2 slots, streamed in finishing order, as Hugging Face")

# --report: the KV cache, per sequence (2 layers, key and value, 2 heads,
# 8 dimensions, 48 tokens: 40 rounded up to tiles of 16, 4 bytes).
report = run(["ds-opt", os.path.join(here, "llama.onnx"), "--generate", "--batch", "3",
              "--max-tokens", "40", "--report"])
per_seq = 2 * 2 * 2 * 8 * 48 * 4
if "3 sequences of up to 40 tokens: %d B per sequence" % per_seq not in report:
    sys.exit("--report: %s" % report)
print("--report: the KV cache, %d B per sequence" % per_seq)

# What a user gets wrong, said plainly.
def fails(cmd, needle):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode == 0 or needle not in res.stderr:
        sys.exit("%s: expected an error with %r, got rc %d: %s" % (" ".join(cmd), needle,
                                                                  res.returncode, res.stderr))

long_prompt = os.path.join(args.workdir, "long.npz")
np.savez(long_prompt, input_ids=np.ones((1, 41), np.int64))
fails(["ds-run", plan, "--prompt", long_prompt, "--max-new-tokens", "4"],
      "row 0: the prompt has 41 tokens, more than the 40 the plan's KV cache holds")
bad = os.path.join(args.workdir, "bad.npz")
np.savez(bad, input_ids=np.array([[1, 2, 96]], np.int64))
fails(["ds-run", plan, "--prompt", bad, "--max-new-tokens", "4"],
      "row 0: token 2 is 96, outside the vocabulary [0, 96)")
fails(["ds-run", plan, "--prompt", prompts], "--max-new-tokens N (N >= 1) is needed")
fails(["ds-run", plan, "--inputs", prompts], "its prompts go in with --prompt")
bad_requests = os.path.join(args.workdir, "bad.jsonl")
open(bad_requests, "w").write('{"prompt": [1, 2]}\n{"prompt": [3], "temprature": 1}\n')
fails(["ds-run", plan, "--requests", bad_requests, "--max-new-tokens", "2"],
      "bad.jsonl:2: INVALID_ARGUMENT:temprature: Cannot find field")
fails(["ds-run", plan, "--requests", bad_requests, "--prompt", prompts],
      "--prompt and --requests exclude each other")
# An encoder (BERT: every token sees every other) is no causal LM.
fails(["ds-opt", os.path.join(here, "..", "hf_exports", "bert.onnx"), "--generate", "--batch", "4",
       "-o", os.path.join(args.workdir, "bert.dsplan")], "cannot derive a generation step")
print("errors: prompt past the cache, ids past the vocabulary, missing flags, an encoder")
