# ZeRO++'s quantized communication: a GPT-style decoder trained with ZeRO-3
# on 2 ranks, plain, with qwZ (`zero_quantized_weights`: every parameter
# all-gather of the training step carries int8 blocks of 256 with an f32
# scale each), with qgZ (`zero_quantized_gradients`: every gradient
# reduce-scatter sends such blocks in one all-to-all and each rank sums
# what it owns in f32) and with both. --report's traffic of the quantized
# collective falls to about a quarter (1 + 4/256 bytes per element instead
# of 4), the other stays, and the losses stay within 1% of plain ZeRO-3's
# over 20 AdamW steps (master weights and optimizer state are untouched).
# Then hpZ, which ds does not build yet, and qwZ/qgZ without stage 3 are
# refused naming the key.
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import json
import os
import re
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
from e2e import MPIRUN, parse_args, run
from train_reference import compare, gpt_training_setup

args = parse_args()
T, steps, world = 16, 20, 2
data_path, onnx_path, model = gpt_training_setup(args.workdir, 6)


def config(name, **zero):
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    cfg = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}},
           "zero_optimization": dict({"stage": 3, "stage3_param_persistence_threshold": 0,
                                      "stage3_max_reuse_distance": 0}, **zero)}
    path = os.path.join(work, "ds_config.json")
    json.dump(cfg, open(path, "w"))
    return work, [onnx_path, "--config", path, "--world-size", str(world), "--loss",
                  "softmax-cross-entropy", "--input-shape", "idx=4,%d" % T]


def traffic(report, collective):
    return int(re.search(r"train_step: %s\s+(\d+) B" % collective, report).group(1))


def train(name, **zero):
    work, common = config(name, **zero)
    plan = os.path.join(work, "train.dsplan")
    run(["ds-opt"] + common + ["-o", plan])
    report = run(["ds-opt"] + common + ["--report"])
    log = os.path.join(work, "train.jsonl")
    run(MPIRUN + ["-np", str(world), "ds-run", plan, "--data", data_path, "--steps", str(steps),
                  "--log", log])
    return ([json.loads(l)["loss"] for l in open(log)], traffic(report, "all_gather"),
            traffic(report, "reduce_scatter"))


fp32, fp32_gather, fp32_scatter = train("zero3")
for name, knobs in [("qwZ", {"zero_quantized_weights": True}),
                    ("qgZ", {"zero_quantized_gradients": True}),
                    ("qwZ + qgZ", {"zero_quantized_weights": True, "zero_quantized_gradients": True})]:
    losses, gather, scatter = train(name.replace(" + ", "_"), **knobs)
    for what, before, after, cut in [("all-gather", fp32_gather, gather, "zero_quantized_weights"),
                                     ("reduce-scatter", fp32_scatter, scatter, "zero_quantized_gradients")]:
        ratio = before / after
        print("%s: train_step %s traffic per step %d B -> %d B (%.2fx less)" % (name, what, before, after, ratio))
        if cut in knobs:
            assert 3.8 < ratio <= 4.0, "%s should cut the %s about 4x, got %.2fx" % (name, what, ratio)
        else:
            assert ratio == 1, "%s changed the %s" % (name, what)
    compare("ZeRO-3 + %s vs ZeRO-3" % name, losses, fp32, tol=1e-2)
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, fp32))
    print("%s losses: worst relative difference %.2e over %d steps (last %.4f / %.4f)"
          % (name, worst, steps, losses[-1], fp32[-1]))
    assert worst > 0, "%s changed nothing: the collectives were not quantized" % name

# Refused, naming the key.
for zero, message in [({"zero_hpz_partition_size": 2}, "zero_hpz_partition_size"),
                      ({"stage": 2, "zero_quantized_gradients": True}, "set zero_optimization.stage to 3"),
                      ({"stage": 2, "zero_quantized_weights": True}, "set zero_optimization.stage to 3")]:
    work, common = config("bad", **zero)
    r = subprocess.run(["ds-opt"] + common + ["-o", os.path.join(work, "x.dsplan")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and message in r.stderr, r.stderr
    print("refused:", r.stderr.strip().splitlines()[0])
print("zeropp: OK")
