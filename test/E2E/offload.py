# ZeRO-Offload (zero_optimization.offload_optimizer "cpu"): optimizer state
# and gradient accumulators in host memory, their update run on the host,
# transfers planned at compile time; and "nvme" (ZeRO-Infinity): the
# optimizer state swapped to a file per rank under nvme_path through
# io_uring. Offloaded runs equal the same runs without offload bit for bit
# (the same kernels on the same values), for ZeRO stages 1-3 on 1 and 2
# ranks, fp32 and bf16, whole and partial (ratio) offload; checkpoints of
# one resume in the other. ds-opt --report
# and ds-run --rank-report show the state moved from the device to the host
# and the bytes transferred; a device budget the plain plan exceeds is met
# by the offloaded one (ds-opt and ds-run check it).
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import json
import os
import re
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
from e2e import MPIRUN, parse_args, run
from train_reference import gpt_training_setup

args = parse_args()
T, steps = 16, 12
data_path, onnx_path, _ = gpt_training_setup(args.workdir, 7)


def compile_plan(name, world, stage, offload, precision=None, ratio=None, extra=(), param=None,
                 zero_keys=None, param_keys=None):
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    zero = dict(zero_keys or {}, stage=stage)
    if stage == 3:  # every parameter partitioned (none kept whole)
        zero["stage3_param_persistence_threshold"] = 0
    if param:
        zero["offload_param"] = {"device": param}
        if param == "nvme":
            os.makedirs(os.path.join(work, "nvme"), exist_ok=True)
            zero["offload_param"]["nvme_path"] = os.path.join(work, "nvme")
        zero["offload_param"].update(param_keys or {})
    if offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        if offload == "nvme":
            os.makedirs(os.path.join(work, "nvme"), exist_ok=True)
            zero["offload_optimizer"] = {"device": "nvme", "nvme_path": os.path.join(work, "nvme"),
                                         "buffer_count": 4}
        if ratio is not None:
            zero["offload_optimizer"]["ratio"] = ratio
    cfg = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 8 // world // 2,
           "gradient_clipping": 1.0,
           "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}},
           "zero_optimization": zero}
    if precision:
        cfg[precision] = {"enabled": True}
    if offload == "nvme" or param == "nvme":  # small blocks, so that a state spans several
        cfg["aio"] = {"block_size": 8192, "queue_depth": 4}
    cfg_path = os.path.join(work, "ds_config.json")
    json.dump(cfg, open(cfg_path, "w"))
    plan = os.path.join(work, "train.dsplan")
    common = [onnx_path, "--config", cfg_path, "--world-size", str(world), "--loss",
              "softmax-cross-entropy", "--input-shape", "idx=%d,%d" % (8 // world // 2, T)]
    report = run(["ds-opt"] + common + ["-o", plan, "--report"] + list(extra))
    return work, plan, report


def train(work, plan, world, n, resume=False, ckpt=None):
    log = os.path.join(work, "train%s.jsonl" % ("-resumed" if resume else ""))
    state = os.path.join(work, "state.npz")
    cmd = ["ds-run", plan, "--data", data_path, "--steps", str(n), "--log", log,
           "--save-state", state, "--rank-report", "--quiet"]
    if ckpt:
        cmd += ["--checkpoint-dir", ckpt, "--checkpoint-every", "6"]
    if resume:
        cmd.append("--resume")
    out = run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd)
    ranks = [json.loads(l) for l in out.splitlines() if l.startswith("{\"rank\"")]
    # Every rank's state (ZeRO partitions it: one file per rank).
    states = {}
    for r in range(world):
        f = state if world == 1 else os.path.join(work, "state.rank%d.npz" % r)
        states.update({"%d/%s" % (r, k): v for k, v in np.load(f).items()})
    return [json.loads(l)["loss"] for l in open(log)], states, ranks


def report_bytes(report, what):
    m = re.search(what + r"\s+(\d+) B", report)
    return int(m.group(1)) if m else 0


def same(name, a, b):
    (la, sa, _), (lb, sb, _) = a, b
    if la != lb:
        sys.exit("%s: losses differ: %s vs %s" % (name, la, lb))
    for k in sb:
        if not np.array_equal(sa[k], sb[k]):
            sys.exit("%s: final state '%s' differs (max %.3g)" % (
                name, k, float(np.abs(sa[k].astype(np.float64) - sb[k]).max())))
    print("%s: %d losses and %d state tensors bitwise equal (last loss %.6f)" % (
        name, len(la), len(sb), la[-1]))


for world, stage, precision in ((1, 2, None), (2, 1, None), (2, 2, None), (2, 3, None),
                                (2, 2, "bf16")):
    tag = "w%d_z%d%s" % (world, stage, "_" + precision if precision else "")
    w0, p0, r0 = compile_plan(tag + "_plain", world, stage, False, precision)
    w1, p1, r1 = compile_plan(tag + "_offload", world, stage, True, precision)
    plain, offloaded = train(w0, p0, world, steps), train(w1, p1, world, steps)
    same(tag + " offload vs none", offloaded, plain)
    # What moved: every gradient accumulator and optimizer state (masters
    # included in bf16) is host state; the device keeps the parameters (and
    # a smaller arena: the update's intermediates are in the host arena).
    host = report_bytes(r1, "offloaded state")
    moved = report_bytes(r0, "gradients") + report_bytes(r0, "optimizer state")
    rk = offloaded[2][0]
    dev0, dev1 = plain[2][0]["device_bytes"], rk["device_bytes"]
    print("%s: device %d B -> %d B per rank, host state %d B (gradients + optimizer state %d B)"
          % (tag, dev0, dev1, host, moved))
    if host != moved or dev1 > dev0 - moved:
        sys.exit("%s: the state was not offloaded" % tag)
    # The report's device row is what ds-run holds (and checks a budget against).
    if report_bytes(r1, r"  device") != dev1:
        sys.exit("%s: the report says %d device bytes, ds-run holds %d" % (
            tag, report_bytes(r1, r"  device"), dev1))
    if rk["host_state_bytes"] != moved or rk["offloaded_bytes"] <= 0 or rk["fetched_bytes"] <= 0:
        sys.exit("%s: --rank-report %s" % (tag, rk))
    if rk["device_state_bytes"] != plain[2][0]["device_state_bytes"] - moved:
        sys.exit("%s: device state %d B, expected %d B" % (
            tag, rk["device_state_bytes"], plain[2][0]["device_state_bytes"] - moved))
    if "train_step: device->host" not in r1 or "optimizer_step: host->device" not in r1:
        sys.exit("%s: no transfers in the report:\n%s" % (tag, r1))
    if tag == "w2_z2":
        z2 = (w0, p0, r0, plain, w1, p1, r1)
    if precision == "bf16":
        # A 2-rank bf16 checkpoint (its 16-bit state stored as uint16, as
        # numpy has no bfloat16) consolidates in one process.
        ckpt = os.path.join(w1, "ckpt")
        train(w1, p1, world, 2, ckpt=ckpt)
        out = os.path.join(w1, "fp32.npz")
        run(["ds-run", p1, "--checkpoint-dir", ckpt, "--zero-to-fp32", out])
        weights = dict(np.load(out))
        if not weights or any(v.dtype != np.float32 for v in weights.values()):
            sys.exit("%s: --zero-to-fp32 wrote %s" % (tag, {k: v.dtype for k, v in weights.items()}))
        print("%s: a 2-rank checkpoint consolidates: %d fp32 tensors" % (tag, len(weights)))

# NVMe (ZeRO-Infinity): the optimizer state (and bf16's masters) in a swap
# file per rank, read before and written after each update; the same result.
# Stage 3 also in sub-groups of 3000 elements (several parameters each, as
# DeepSpeed groups them): swapped in batches, one sub-group ahead, with less
# host memory than one sub-group of everything (the default 1e9).
host_arena = {}
for world, stage, precision, sub in ((2, 2, None, None), (2, 3, None, None), (2, 3, None, 3000),
                                     (1, 2, "bf16", None)):
    tag = "w%d_z%d%s%s" % (world, stage, "_" + precision if precision else "",
                           "_sub%d" % sub if sub else "")
    w0, p0, r0 = compile_plan(tag + "_plain", world, stage, False, precision)
    wn, pn, rn = compile_plan(tag + "_nvme", world, stage, "nvme", precision,
                              zero_keys={"sub_group_size": sub} if sub else None)
    plain, swapped = train(w0, p0, world, steps), train(wn, pn, world, steps)
    same(tag + " nvme offload vs none", swapped, plain)
    host_arena[(stage, sub)] = swapped[2][0]["host_arena_bytes"]
    rk = swapped[2][0]
    nvme = report_bytes(rn, r"  nvme")
    opt = report_bytes(r0, "optimizer state")
    # Unwritten state (zero moments, the masters' initial values) is read
    # from memory, not the drive: step 1 reads nothing.
    initial = 0
    print("%s: %d B on NVMe per rank (optimizer state %d B), %d B read, %d B written, "
          "%.2f / %.2f GB/s" % (tag, rk["nvme_bytes"], opt, rk["nvme_read_bytes"],
                               rk["nvme_written_bytes"], rk["nvme_read_gbps"],
                               rk["nvme_write_gbps"]))
    if nvme != opt or rk["nvme_bytes"] != opt:
        sys.exit("%s: %d B reported on NVMe, %d B measured, optimizer state %d B" % (
            tag, nvme, rk["nvme_bytes"], opt))
    if rk["nvme_written_bytes"] != steps * opt + initial or \
            rk["nvme_read_bytes"] != (steps - 1) * opt + initial:
        sys.exit("%s: NVMe traffic %s" % (tag, rk))
    if os.listdir(os.path.join(wn, "nvme")):
        sys.exit("%s: swap files left behind: %s" % (tag, os.listdir(os.path.join(wn, "nvme"))))
    if tag == "w2_z2":
        # An NVMe run's checkpoint holds the swapped state: it resumes (in
        # the same plan) and ends where the uninterrupted run does.
        ckpt = os.path.join(wn, "ckpt")
        train(wn, pn, 2, 6, ckpt=ckpt)
        resumed = train(wn, pn, 2, steps, resume=True, ckpt=ckpt)
        if resumed[0] != plain[0][6:]:
            sys.exit("nvme checkpoint resumed: %s vs %s" % (resumed[0], plain[0][6:]))
        print("w2_z2 nvme: resumed from its step-6 checkpoint, steps 7-%d bitwise equal" % steps)

if not host_arena[(3, 3000)] < host_arena[(3, None)]:
    sys.exit("sub-groups of 3000 elements hold %d B of host memory, one sub-group %d B" % (
        host_arena[(3, 3000)], host_arena[(3, None)]))
print("w2_z3 nvme: host arena %d B in sub-groups of 3000 elements, %d B in one" % (
    host_arena[(3, 3000)], host_arena[(3, None)]))

# Parameter offload (offload_param, ZeRO-3): the partitioned parameters in
# host memory or on NVMe, fetched before each gather; the same result, and
# the device no longer holds them. With NVMe, max_in_cpu elements stay in
# host memory (0: all on NVMe; 7000: some of each), and buffer_count
# bounds the swap-ins staged at once (2: one use ahead).
nvme_params = {}
for world, offload, param, keys in ((2, "cpu", "cpu", None),
                                    (2, "nvme", "nvme", {"max_in_cpu": 0}),
                                    (2, "nvme", "nvme", {"max_in_cpu": 7000, "buffer_count": 2}),
                                    (1, None, "cpu", None)):
    tag = "w%d_z3_param_%s%s%s" % (world, param, "_opt_" + offload if offload else "",
                                   "_cpu%d" % keys["max_in_cpu"] if keys else "")
    w0, p0, r0 = compile_plan(tag + "_plain", world, 3, False)
    wp, pp, rp = compile_plan(tag, world, 3, offload, param=param, param_keys=keys)
    plain, moved = train(w0, p0, world, steps), train(wp, pp, world, steps)
    same(tag + " vs none", moved, plain)
    params = report_bytes(r0, "parameters")
    rk, rk0 = moved[2][0], plain[2][0]
    print("%s: device state %d B -> %d B per rank, host state %d B, NVMe %d B (parameters %d B)"
          % (tag, rk0["device_state_bytes"], rk["device_state_bytes"], rk["host_state_bytes"],
             rk["nvme_bytes"], params))
    if rk["device_state_bytes"] > rk0["device_state_bytes"] - rk0["param_bytes"] + 64 * world:
        sys.exit("%s: the parameters are still device state: %s" % (tag, rk))
    if "->device" not in rp:
        sys.exit("%s: no fetches in the report" % tag)
    if keys:
        nvme_params[keys["max_in_cpu"]] = rk["nvme_bytes"] - report_bytes(r0, "optimizer state")
        nvme_params["all"] = params
if not 0 < nvme_params[7000] < nvme_params[0] == nvme_params["all"]:
    sys.exit("parameters on NVMe: %s B (max_in_cpu 0 and 7000; all: the parameters)" % nvme_params)
print("offload_param nvme: %d B of parameters on NVMe with max_in_cpu 0, %d B with 7000" % (
    nvme_params[0], nvme_params[7000]))

# Partial offload: half the parameters' state on the host, the same result.
w0, p0, r0, plain, w1, p1, r1 = z2
wr, pr, rr = compile_plan("w2_z2_ratio", 2, 2, True, ratio=0.5)
half = train(wr, pr, 2, steps)
same("w2_z2 offload ratio 0.5 vs none", half, plain)
hr = report_bytes(rr, "offloaded state")
if not 0 < hr < report_bytes(r1, "offloaded state"):
    sys.exit("ratio 0.5 offloaded %d B of %d" % (hr, report_bytes(r1, "offloaded state")))

# Checkpoints are the same either way: an offloaded run's step-6 checkpoint
# resumes in the plain plan and ends where the uninterrupted run does.
ckpt = os.path.join(w1, "ckpt")
train(w1, p1, 2, 6, ckpt=ckpt)
resumed = train(w0, p0, 2, steps, resume=True, ckpt=ckpt)
if resumed[0] != plain[0][6:]:
    sys.exit("offloaded checkpoint resumed without offload: %s vs %s" % (resumed[0], plain[0][6:]))
print("w2_z2: an offloaded checkpoint resumes without offload: steps 7-%d bitwise equal" % steps)

# A device budget between the two: the plain plan is refused (by ds-opt and,
# given the budget at run time, by ds-run), the offloaded one fits and runs.
dev0 = plain[2][0]["device_bytes"]
dev1 = train(w1, p1, 2, 1)[2][0]["device_bytes"]
budget = (dev0 + dev1) // 2
import subprocess
cfg = os.path.join(w0, "ds_config.json")
common = [onnx_path, "--config", cfg, "--world-size", "2", "--loss", "softmax-cross-entropy",
          "--input-shape", "idx=2,%d" % T, "--device-memory", "%dB" % budget]
res = subprocess.run(["ds-opt"] + common + ["-o", os.path.join(w0, "budget.dsplan")],
                     capture_output=True, text=True)
if res.returncode == 0 or "over the device memory budget of %d bytes" % budget not in res.stderr:
    sys.exit("ds-opt accepted the plain plan under a %d B budget: %s" % (budget, res.stderr))
res = subprocess.run(MPIRUN + ["-np", "2", "ds-run", p0, "--data", data_path, "--steps", "1",
                               "--device-memory", "%dB" % budget, "--quiet"],
                     capture_output=True, text=True)
if res.returncode == 0 or "over the device memory budget" not in res.stderr:
    sys.exit("ds-run ran the plain plan under a %d B budget: %s" % (budget, res.stderr))
cfg = os.path.join(w1, "ds_config.json")
common[2] = cfg
run(["ds-opt"] + common + ["-o", os.path.join(w1, "budget.dsplan")])
budgeted = train(w1, os.path.join(w1, "budget.dsplan"), 2, steps)
same("w2_z2 offloaded under a %d B device budget (plain needs %d B)" % (budget, dev0), budgeted,
     plain)
if budgeted[2][0]["device_memory_budget"] != budget or \
        budgeted[2][0]["device_pool_peak_bytes"] > budget:
    sys.exit("budget not recorded or exceeded: %s" % budgeted[2][0])
