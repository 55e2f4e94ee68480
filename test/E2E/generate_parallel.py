# Generation with the other features: tensor-parallel decode (mpirun -np 2),
# bf16 products, and int8/int4 weights, alone and together. The exports are
# generate.py's (PyTorch 2's exporter, no cache inputs; GPT-2's fused c_attn,
# Llama's and Mistral's grouped-query attention with one key/value head per
# rank at tp=2). Greedy tokens must be Hugging Face's for f32 and bf16 (these
# small models keep their argmax in bf16) and one rank's for every split;
# sampling on two ranks must draw one rank's tokens; the KV cache per rank is
# half of one rank's.
# REQUIRES: compiler, mpi
# RUN: %python %s --workdir %t
import json
import os
import re
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
from e2e import MPIRUN, parse_args, run

args = parse_args()
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "generate")
os.makedirs(args.workdir, exist_ok=True)
prompts = os.path.join(here, "prompts.npz")
width = np.load(prompts)["input_ids"].shape[1]
NEW = 12


def compile_plan(model, name, *flags):
    plan = os.path.join(args.workdir, name + ".dsplan")
    report = run(["ds-opt", os.path.join(here, model + ".onnx"), "--generate", "--batch", "2",
                  "--max-tokens", "48", "-o", plan, "--report", *flags])
    cache = re.search(r"kv cache\s+(\d+) B", report)
    collectives = re.search(r"decode: all_reduce .* (\d+) collectives", report)
    weights = int(re.search(r"parameters\s+(\d+) B", report).group(1)) + \
        int(re.search(r"constants\s+(\d+) B", report).group(1))
    compile_plan.weights = weights
    return plan, int(cache.group(1)), int(collectives.group(1)) if collectives else 0


def generate(plan, name, ranks, *flags):
    out = os.path.join(args.workdir, name + ".npz")
    cmd = ["ds-run", plan, "--prompt", prompts, "--max-new-tokens", str(NEW), "--outputs", out,
           *flags]
    run(MPIRUN + ["-np", str(ranks)] + cmd if ranks > 1 else cmd)
    return np.load(out)["sequences"][:, width:]


SAMPLED = ("--temperature", "0.8", "--top-p", "0.9", "--seed", "3")
for model in ("gpt2", "llama", "mistral"):
    expected = np.array([e[:NEW] for e in json.load(open(os.path.join(here, model + ".json")))
                         ["expected"]])
    one, cache1, _ = compile_plan(model, model + "_one")
    f32_weights = compile_plan.weights
    tp, cache2, collectives = compile_plan(model, model + "_tp2", "--tensor-parallel", "2")
    # Each layer's attention and MLP split: two all-reduces a layer, half
    # the cache (whole key/value heads) on each rank.
    if collectives != 4 or cache2 * 2 != cache1:
        sys.exit("%s tp=2: %d all-reduces a decode step, cache %d B vs %d B on one rank"
                 % (model, collectives, cache2, cache1))
    got = generate(tp, model + "_tp2", 2)
    if not (got == expected).all():
        sys.exit("%s tp=2 greedy: %s, Hugging Face %s" % (model, got.tolist(), expected.tolist()))
    a, b = generate(one, model + "_s1", 1, *SAMPLED), generate(tp, model + "_s2", 2, *SAMPLED)
    if not (a == b).all():
        sys.exit("%s tp=2 sampled %s, one rank %s" % (model, b.tolist(), a.tolist()))
    if (a == expected).all():
        sys.exit("%s: sampling drew the greedy tokens" % model)
    # bf16 products (the cache and attention stay f32).
    bf, _, _ = compile_plan(model, model + "_bf16", "--dtype", "bf16")
    if compile_plan.weights > 0.8 * f32_weights:
        sys.exit("%s bf16: %d B of weights, f32 %d B" % (model, compile_plan.weights, f32_weights))
    got = generate(bf, model + "_bf16", 1)
    if not (got == expected).all():
        sys.exit("%s bf16 greedy: %s, Hugging Face %s" % (model, got.tolist(), expected.tolist()))
    print("%s: tp=2 greedy as Hugging Face, sampled as one rank, cache %d -> %d B a rank; bf16 "
          "greedy as Hugging Face" % (model, cache1, cache2))

# Quantized weights on two ranks: each rank's block of the weight quantized
# whole (weight-only: the same values as one rank, so the same tokens),
# with bf16 too.
for flags in (["--quantize", "int8-weight"], ["--quantize", "int4-weight", "--group-size", "16"],
              ["--dtype", "bf16"]):
    name = "llama_" + "_".join(f.strip("-") for f in flags)
    one = generate(compile_plan("llama", name + "_1", *flags)[0], name + "_1", 1)
    tp = generate(compile_plan("llama", name + "_2", *flags, "--tensor-parallel", "2")[0],
                  name + "_2", 2)
    if not (one == tp).all():
        sys.exit("llama %s: tp=2 %s, one rank %s" % (" ".join(flags), tp.tolist(), one.tolist()))
    print("llama %s: tp=2 tokens as one rank's" % " ".join(flags))

# ZeRO-Inference: under a device budget smaller than the weights, the plan
# is refused unless the weights stay in host memory (--offload-weights cpu),
# each fetched a layer ahead of its use; then it generates Hugging Face's
# tokens within the budget (ds-run bounds the device pool to it), alone and
# with int8 weights.
expected = np.array([e[:NEW] for e in json.load(open(os.path.join(here, "llama.json")))
                     ["expected"]])
budget = "150000"  # bytes: the device plan needs ~208 kB, the offloaded one ~176 kB
res = subprocess.run(["ds-opt", os.path.join(here, "llama.onnx"), "--generate", "--batch", "2",
                      "--max-tokens", "48", "--device-memory", budget, "-o",
                      os.path.join(args.workdir, "x.dsplan")], capture_output=True, text=True)
if res.returncode == 0 or "--offload-weights cpu" not in res.stderr:
    sys.exit("a plan over --device-memory: %s" % res.stderr)
OFFLOAD = ("--offload-weights", "cpu", "--offload-weights-threshold", "1000",
           "--device-memory", "190000")
plan = os.path.join(args.workdir, "llama_zi.dsplan")
report = run(["ds-opt", os.path.join(here, "llama.onnx"), "--generate", "--batch", "2",
              "--max-tokens", "48", "-o", plan, "--report", *OFFLOAD])
host = int(re.search(r"host\s+\d+ B .*weights (\d+) B", report).group(1))
device = int(re.search(r"device\s+(\d+) B", report).group(1))
if host < 80000 or device > 190000 or "decode: host->device" not in report:
    sys.exit("--offload-weights: %d B of weights in host memory, %d B on the device:\n%s"
             % (host, device, report))
got = generate(plan, "llama_zi", 1)
if not (got == expected).all():
    sys.exit("llama offloaded: %s, Hugging Face %s" % (got.tolist(), expected.tolist()))
q = ["--quantize", "int8-weight", "--offload-weights-threshold", "500"]
one = generate(compile_plan("llama", "llama_q8", "--quantize", "int8-weight")[0], "llama_q8", 1)
zi = compile_plan("llama", "llama_q8_zi", *q, "--offload-weights", "cpu")[0]
if "weights in host memory" not in run(["ds-opt", os.path.join(here, "llama.onnx"), "--generate",
                                        "--batch", "2", "--max-tokens", "48", "--report", *q,
                                        "--offload-weights", "cpu"]):
    sys.exit("int8 weights were not offloaded")
off = generate(zi, "llama_q8_zi", 1)
if not (one == off).all():
    sys.exit("llama int8 offloaded: %s, on the device %s" % (off.tolist(), one.tolist()))
print("ZeRO-Inference: %d B of weights in host memory, %d B on the device (budget 190000); "
      "tokens as Hugging Face, int8 as on the device" % (host, device))

# From NVMe: the weights go to the swap file once when the run starts and
# every program run reads them from it (two layers ahead of their use).
plan = os.path.join(args.workdir, "llama_nvme.dsplan")
report = run(["ds-opt", os.path.join(here, "llama.onnx"), "--generate", "--batch", "2",
              "--max-tokens", "48", "-o", plan, "--report", "--offload-weights", "nvme",
              "--offload-weights-threshold", "1000"])
if not re.search(r"nvme\s+90112 B .*weights, staged to the drive", report):
    sys.exit("--offload-weights nvme:\n" + report)
swap = os.path.join(args.workdir, "swap")
os.makedirs(swap, exist_ok=True)
out = os.path.join(args.workdir, "llama_nvme.npz")
stats = json.loads(run(["ds-run", plan, "--prompt", prompts, "--max-new-tokens", str(NEW),
                        "--outputs", out, "--nvme-path", swap, "--rank-report"])
                   .strip().splitlines()[-1])
got = np.load(out)["sequences"][:, width:]
if not (got == expected).all():
    sys.exit("llama from NVMe: %s, Hugging Face %s" % (got.tolist(), expected.tolist()))
if stats["nvme_written_bytes"] != 90112 or stats["nvme_read_bytes"] < 90112 * NEW:
    sys.exit("llama from NVMe: %s" % stats)
print("ZeRO-Inference from NVMe: 90112 B of weights staged once, %d B read in %d tokens; tokens "
      "as Hugging Face" % (stats["nvme_read_bytes"], NEW))
