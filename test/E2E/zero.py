# ZeRO stages 1, 2 and 3 (optimizer state; and gradients; and parameters,
# partitioned over the data-parallel ranks) train a GPT-style decoder on 2
# and 4 ranks like one rank with the same global batch: per-step losses
# within 1e-5 over 20 steps, final weights within 1e-4. Each rank keeps 1/N
# of the optimizer moments (and at stage 3 of the parameters) per ds-opt
# --report, checkpoints hold one state file per rank, a ZeRO-2 run resumed
# from its step-10 checkpoint continues exactly, and a ZeRO-3 checkpoint
# saved by 4 ranks resumes on 2 (resharded at load) and continues like an
# uninterrupted run, as ZeRO-2 does from 2 ranks to 1 and from 1 to 2. One process consolidates a 4-rank ZeRO-3 checkpoint into
# whole fp32 weights and an ONNX file (zero_to_fp32).
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import json
import os
import re
import shutil
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
from e2e import MPIRUN, parse_args, run
from train_reference import compare, gpt_training_setup

args = parse_args()
T, steps = 16, 20
data_path, onnx_path, model = gpt_training_setup(args.workdir, 6)


def compile_plan(name, world, mbs, stage, persistence=0, **knobs):
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    # Stage 3 releases every gathered parameter after its use (no reuse
    # between forward and backward), the schedule the 3 Psi formula counts.
    zero = {"stage": stage, "stage3_param_persistence_threshold": persistence,
            "stage3_max_reuse_distance": 0}
    zero.update(knobs)
    cfg = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": mbs, "gradient_clipping": 1.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}},
           "zero_optimization": zero}
    cfg_path = os.path.join(work, "ds_config.json")
    json.dump(cfg, open(cfg_path, "w"))
    plan = os.path.join(work, "train.dsplan")
    common = [onnx_path, "--config", cfg_path, "--world-size", str(world), "--loss",
              "softmax-cross-entropy", "--input-shape", "idx=%d,%d" % (mbs, T)]
    run(["ds-opt"] + common + ["-o", plan])
    report = run(["ds-opt"] + common + ["--report"])
    return work, plan, report


def train(work, plan, world, n, resume=False):
    log = os.path.join(work, "train.jsonl")
    cmd = ["ds-run", plan, "--data", data_path, "--steps", str(n), "--log", log,
           "--checkpoint-dir", os.path.join(work, "ckpt"), "--checkpoint-every", "10"]
    if resume:
        cmd.append("--resume")
    run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd)
    return [json.loads(l)["loss"] for l in open(log)]


def final_params(work, like):
    """The trained parameters of a checkpoint; ZeRO-3's per-rank blocks are
    joined in rank order, unpadded and reshaped like `like`'s."""
    ckpt = os.path.join(work, "ckpt")
    step = open(os.path.join(ckpt, "latest")).read().strip()
    files = sorted((f for f in os.listdir(os.path.join(ckpt, step)) if f.startswith("state")),
                   key=lambda f: int(re.sub(r"\D", "", f) or 0))
    states = [np.load(os.path.join(ckpt, step, f)) for f in files]
    params = {}
    for k in states[0].files:
        if not k.startswith("param:"):
            continue
        v = states[0][k]
        if like and v.shape != like[k].shape:  # blocks
            v = np.concatenate([s[k] for s in states])[:like[k].size].reshape(like[k].shape)
        params[k] = v
    return files, params


def report_bytes(report, what):
    return int(re.search(what + r"\s+(\d+) B", report).group(1))


work1, plan1, report1 = compile_plan("w1", 1, 8, 0)
one = train(work1, plan1, 1, steps)
_, one_params = final_params(work1, None)
for stage in (1, 2, 3):
    for world in (2, 4):
        name = "zero%d_w%d" % (stage, world)
        work, plan, report = compile_plan(name, world, 8 // world, stage)
        # Traffic per step (one micro-step here) as the ZeRO paper counts it:
        # 2 Psi at stages 1-2, 3 Psi at stage 3 (4 bytes per element; Psi is
        # the trained parameters, padded to N blocks).
        volume = sum(int(v) for v in re.findall(r"(?:train_step|optimizer_step): (?:all_gather|"
                                                 r"reduce_scatter|all_reduce)\s+(\d+) B", report))
        psi4 = report_bytes(report1, "gradients")
        want = (3 if stage == 3 else 2) * psi4
        print("%s: %d B of collectives per step, %.3f x Psi" % (name, volume, volume / psi4))
        if abs(volume - want) > 0.02 * want:
            sys.exit("%s: traffic %d B per step, the ZeRO formula says %d" % (name, volume, want))
        for what, from_stage in (("optimizer state", 1), ("gradients", 2), ("parameters", 3)):
            b, b1 = report_bytes(report, what), report_bytes(report1, what)
            print("%s: %s per rank %d B (one rank %d B)" % (name, what, b, b1))
            slack = 8 * 64 * world  # padding to a multiple of the ranks
            if stage >= from_stage and b > b1 / world + slack:
                sys.exit("%s: %s are not partitioned" % (name, what))
        losses = train(work, plan, world, steps)
        compare("%s vs 1 rank" % name, losses, one, tol=1e-5)
        files, params = final_params(work, one_params)
        if files != ["state.rank%d.npz" % r for r in range(world)]:
            sys.exit("%s: checkpoint files %s, expected one per rank" % (name, files))
        worst = 0.0
        for k in one_params:
            diff = np.abs(params[k] - one_params[k])
            if k.endswith("c_attn.bias"):
                diff[32:64] = 0  # the key bias: see data_parallel.py
            worst = max(worst, float(diff.max() / np.abs(one_params[k]).max()))
        print("%s: final weights relative error %.3g" % (name, worst))
        if worst > 1e-4:
            sys.exit("%s: final weights differ from one rank's by %.3g" % (name, worst))
        if stage == 3 and world == 4:
            zero3_w4 = (work, plan)

# Consolidation (DeepSpeed's zero_to_fp32): one process joins the 4 ranks'
# ZeRO-3 blocks into whole fp32 weights keyed by ONNX initializer name, and
# into an ONNX file with the trained weights; both match one rank's export.
import onnx
from onnx import numpy_helper
work, plan = zero3_w4
one_onnx = os.path.join(work1, "one.onnx")
run(["ds-run", plan1, "--checkpoint-dir", os.path.join(work1, "ckpt"), "--export-onnx", one_onnx])
out_npz, out_onnx = os.path.join(work, "fp32.npz"), os.path.join(work, "trained.onnx")
msg = run(["ds-run", plan, "--checkpoint-dir", os.path.join(work, "ckpt"), "--zero-to-fp32", out_npz,
           "--export-onnx", out_onnx])
print(msg.strip())
want = {t.name: numpy_helper.to_array(t) for t in onnx.load(one_onnx).graph.initializer}
fp32 = dict(np.load(out_npz))
got = onnx.load(out_onnx)
onnx.checker.check_model(got)
exported = {t.name: numpy_helper.to_array(t) for t in got.graph.initializer}
# The export also carries the initializers held constant (an attention
# mask buffer), untouched; zero_to_fp32 writes what was trained.
import re
held = set(re.search(r"held constant: .*?: (.*)", report1).group(1).split(", "))
if set(fp32) != set(want) - held:
    sys.exit("zero_to_fp32 wrote %s, one rank's export has %s (held constant: %s)"
             % (sorted(fp32), sorted(want), sorted(held)))
worst = 0.0
for k, v in fp32.items():
    if v.shape != want[k].shape or not np.array_equal(exported[k], v):
        sys.exit("consolidated '%s': shape %s, one rank %s, or ONNX differs" % (k, v.shape, want[k].shape))
    diff = np.abs(v - want[k])
    if k.endswith("c_attn.bias"):
        diff[32:64] = 0  # the key bias: see data_parallel.py
    worst = max(worst, float(diff.max() / np.abs(want[k]).max()))
print("zero_to_fp32 of 4 ZeRO-3 ranks: %d tensors, relative error vs one rank %.3g" % (len(fp32), worst))
if worst > 1e-4:
    sys.exit("consolidated weights differ from one rank's by %.3g" % worst)

# DeepSpeed's scheduling knobs change when bytes move, never the result.
def collectives(report, program, kind):
    m = re.search(program + r": " + kind + r"\s+(\d+) B.*?(\d+) collectives?", report)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def arena(report):
    return report_bytes(report, r"activations \(arena\)")


def knob_run(name, stage, **knobs):
    work, plan, report = compile_plan(name, 4, 2, stage, **knobs)
    compare("%s vs 1 rank" % name, train(work, plan, 4, steps), one, tol=1e-5)
    return report


# reduce/allgather_bucket_size: DeepSpeed's default (5e8 elements) holds the
# whole model in one bucket, one collective per step; 3000-element buckets
# split it (stage 2; overlap_comm issues each bucket as its last gradient is
# produced).
base = knob_run("knobs_z2_base", 2)
small = knob_run("knobs_z2_buckets", 2, reduce_bucket_size=3000, allgather_bucket_size=3000,
                 overlap_comm=True)
for program, kind in (("train_step", "reduce_scatter"), ("optimizer_step", "all_gather")):
    (b0, n0), (b1, n1) = collectives(base, program, kind), collectives(small, program, kind)
    print("stage 2 %s %s: %d collective per step, %d with 3000-element buckets (%d B both)"
          % (program, kind, n0, n1, b1))
    if not (n0 == 1 and b1 == b0 and n1 >= b1 // 4 / 3000):
        sys.exit("%s buckets: %d -> %d collectives, %d -> %d B" % (kind, n0, n1, b0, b1))
# stage3_max_reuse_distance at DeepSpeed's default (1e9): the forward's
# gathered copies serve the backward (gathers once per step, 2 Psi in all),
# for longer-lived copies; stage3_max_live_parameters bounds that.
release = knob_run("knobs_z3_release", 3, stage3_prefetch_bucket_size=0)
reuse = knob_run("knobs_z3_reuse", 3, stage3_prefetch_bucket_size=0, stage3_max_reuse_distance=10 ** 9)
bounded = knob_run("knobs_z3_bounded", 3, stage3_prefetch_bucket_size=0,
                   stage3_max_reuse_distance=10 ** 9, stage3_max_live_parameters=3000)
g_release, g_reuse, g_bounded = (collectives(r, "train_step", "all_gather")[0]
                                 for r in (release, reuse, bounded))
print("stage 3 gathers per step: %d B released after use, %d B reused, %d B reuse under a "
      "3000-element live bound; arena %d / %d / %d B" % (
          g_release, g_reuse, g_bounded, arena(release), arena(reuse), arena(bounded)))
if not (g_reuse * 1.7 < g_release and g_reuse < g_bounded and arena(reuse) > arena(release)
        and arena(bounded) < arena(reuse)):
    sys.exit("stage3_max_reuse_distance / stage3_max_live_parameters had no effect")
# stage3_prefetch_bucket_size: gathers issued ahead of their use keep more
# gathered bytes alive (the price of the overlap); the live bound caps it.
prefetch = knob_run("knobs_z3_prefetch", 3)
capped = knob_run("knobs_z3_prefetch_capped", 3, stage3_max_live_parameters=3000)
print("stage 3 arena: %d B without prefetch, %d B prefetching, %d B under a 3000-element bound"
      % (arena(release), arena(prefetch), arena(capped)))
if not (arena(prefetch) > arena(release) and arena(capped) < arena(prefetch)):
    sys.exit("stage3_prefetch_bucket_size / stage3_max_live_parameters had no effect")

# Gradient accumulation under ZeRO-3 (2 ranks x 2 micro-steps of 2): the
# reduce-scattered blocks accumulate, the optimizer steps once per global batch.
work, plan, _ = compile_plan("zero3_gas2", 2, 2, 3)
compare("zero3 2 ranks, 2 accumulation steps vs 1 rank", train(work, plan, 2, steps), one, tol=1e-5)

# Resume a ZeRO-2 run from its step-10 checkpoint: the same trajectory.
work, plan, _ = compile_plan("zero2_resume", 2, 4, 2)
full = train(work, plan, 2, steps)
shutil.rmtree(os.path.join(work, "ckpt"))
first = train(work, plan, 2, 10)
rest = train(work, plan, 2, steps, resume=True)
compare("zero2 resumed at step 10 vs uninterrupted", first + rest[-10:], full, tol=1e-7)

# DeepSpeed's default persistence threshold (1e5 elements) keeps all of this
# small model's parameters whole at stage 3; 2048 splits only the larger ones.
for threshold, want in ((100000, "all whole"), (2048, "some split")):
    _, _, rep = compile_plan("zero3_persist%d" % threshold, 2, 4, 3, threshold)
    pb, pb1 = report_bytes(rep, "parameters"), report_bytes(report1, "parameters")
    print("stage 3, persistence threshold %d: parameters per rank %d B (one rank %d B)"
          % (threshold, pb, pb1))
    if (pb == pb1) != (want == "all whole") or pb > pb1:
        sys.exit("persistence threshold %d: expected %s" % (threshold, want))

# Save at 4 ranks, resume at 2 (ZeRO-3: parameters, moments and gradient
# blocks are rejoined and cut again): the losses continue like one rank's.
work4, plan4, _ = compile_plan("zero3_save4", 4, 2, 3)
first = train(work4, plan4, 4, 10)
work2, plan2, _ = compile_plan("zero3_resume2", 2, 4, 3)
shutil.copytree(os.path.join(work4, "ckpt"), os.path.join(work2, "ckpt"))
shutil.copy(os.path.join(work4, "train.jsonl"), os.path.join(work2, "train.jsonl"))
rest = train(work2, plan2, 2, steps, resume=True)
compare("zero3 saved at 4 ranks, resumed at 2 vs 1 rank", rest, one, tol=1e-5)

# ZeRO-2 across one rank: saved at 2 ranks, resumed at 1 (the blocks
# rejoined for a plan that partitions nothing), and saved at 1, resumed at 2.
for save_world, load_world in ((2, 1), (1, 2)):
    ws, ps, _ = compile_plan("zero2_save%d" % save_world, save_world, 8 // save_world, 2)
    train(ws, ps, save_world, 10)
    wl, pl, _ = compile_plan("zero2_load%d_from%d" % (load_world, save_world), load_world,
                             8 // load_world, 2)
    shutil.copytree(os.path.join(ws, "ckpt"), os.path.join(wl, "ckpt"))
    shutil.copy(os.path.join(ws, "train.jsonl"), os.path.join(wl, "train.jsonl"))
    rest = train(wl, pl, load_world, steps, resume=True)
    compare("zero2 saved at %d ranks, resumed at %d vs 1 rank" % (save_world, load_world),
            rest, one, tol=1e-5)
import subprocess
bad = subprocess.run(["ds-run", zero3_w4[1], "--zero-to-fp32", out_npz], capture_output=True, text=True)
if bad.returncode == 0 or "needs --checkpoint-dir" not in bad.stderr:
    sys.exit("--zero-to-fp32 without a checkpoint: %r" % bad.stderr)
# The checkpoint records its layouts: another stage's plan (one rank,
# stage 0) consolidates it to the same weights.
other_npz = os.path.join(zero3_w4[0], "fp32-other-plan.npz")
run(["ds-run", plan1, "--checkpoint-dir", os.path.join(zero3_w4[0], "ckpt"), "--zero-to-fp32",
     other_npz])
other = dict(np.load(other_npz))
if set(other) != set(fp32) or any(not np.array_equal(other[k], fp32[k]) for k in fp32):
    sys.exit("consolidating with a stage-0 plan gave other weights than the stage-3 plan")
print("consolidation errors:", bad.stderr.strip())
