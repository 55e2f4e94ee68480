#!/usr/bin/env python3
"""ZeRO stages 0-3 at 1, 2 and 4 ranks on a GPT-style model: step time and
per-rank memory (what ds-opt --report predicts and ds-run --rank-report
measures), with ratios against stage 0 and one rank; the peer, PyTorch's
DistributedDataParallel (stage 0) and ZeroRedundancyOptimizer (stage 1) on
gloo, side by side; and the ZeRO schedule knobs (buckets, overlap_comm,
stage-3 prefetch and reuse) with the share of communication time the
compute hides, measured on the --trace timeline.

  /usr/bin/python3 bench/zero_training.py [--steps 6] [--d 128] [--layers 4] [--trace DIR]

Ranks run under mpirun --oversubscribe: on a 2-core machine 4 ranks share
2 cores, so step times show the schedule's overhead, not a speedup; the
memory columns are the point here. (PyTorch 1.13's FSDP needs CUDA, so
stages 2-3 have no CPU peer here.)
"""
import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "lib"))
import numpy as np
import torch
from torch_models import GPT

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def torch_worker(a):
    """One rank of the PyTorch peer, started by mpirun: DDP (+ ZeRO-1 with
    ZeroRedundancyOptimizer) on gloo, the same model, batch and optimizer."""
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = DistributedDataParallel(
        GPT(vocab=a.vocab, ctx=a.seq, d=a.d, heads=4, layers=a.layers, tied=True))
    if a.torch_worker == "zero1":
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.from_numpy(np.load(a.data)["idx"])
    labels = torch.from_numpy(np.load(a.data)["labels"])
    mbs = a.batch // world
    times = []
    for step in range(a.steps):
        start = (step * a.batch + rank * mbs) % tokens.shape[0]
        x, y = tokens[start:start + mbs], labels[start:start + mbs]
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, a.vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        times = sorted(times[1:]) or times
        print(json.dumps({"step_ms": 1e3 * times[len(times) // 2]}))
    dist.destroy_process_group()


def torch_peer(a, data, world, kind):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", kind, "--data", data,
           "--steps", str(a.steps), "--d", str(a.d), "--layers", str(a.layers), "--vocab",
           str(a.vocab), "--seq", str(a.seq), "--batch", str(a.batch), "--threads", str(a.threads)]
    out = run(MPIRUN + ["-np", str(world)] + cmd)
    return json.loads(out.strip().splitlines()[-1])["step_ms"]


def hidden_share(trace_path, rank=0):
    """Of the communication track's busy time, the share the compute track
    is busy too (the overlap the schedule achieved)."""
    ev = [e for e in json.load(open(trace_path))["traceEvents"]
          if e.get("ph") == "X" and e.get("pid") == rank]
    compute = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e["tid"] == 0)
    merged = []
    for b, e in compute:
        if merged and b <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([b, e])
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["tid"] == 1]
    busy = sum(e - b for b, e in comm)
    hidden = 0.0
    for b, e in comm:
        for cb, ce in merged:
            if ce <= b:
                continue
            if cb >= e:
                break
            hidden += min(e, ce) - max(b, cb)
    return busy, (hidden / busy if busy else 0.0), len(comm)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8, help="global batch")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--trace", default="", help="keep the traces of the schedule table here")
    ap.add_argument("--torch-worker", default="", help=argparse.SUPPRESS)
    ap.add_argument("--data", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_worker:
        return torch_worker(a)
    work = tempfile.mkdtemp(prefix="ds-zero-bench-")
    torch.manual_seed(0)
    model = GPT(vocab=a.vocab, ctx=a.seq, d=a.d, heads=4, layers=a.layers, tied=True)
    psi = sum(p.numel() for p in model.parameters())
    onnx_path = os.path.join(work, "gpt.onnx")
    torch.onnx.export(copy.deepcopy(model), (torch.zeros(2, a.seq, dtype=torch.long),), onnx_path,
                      input_names=["idx"], output_names=["logits"], opset_version=17,
                      dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
    tokens = np.random.default_rng(0).integers(0, a.vocab, (64, a.seq + 1)).astype(np.int64)
    data = os.path.join(work, "data.npz")
    np.savez(data, idx=tokens[:, :-1].copy(), labels=tokens[:, 1:].copy())
    print("model: GPT d=%d layers=%d vocab=%d seq=%d, %d parameters (Psi); global batch %d"
          % (a.d, a.layers, a.vocab, a.seq, psi, a.batch))
    print("%-6s %-5s %10s %12s %12s %12s %12s %10s %10s %9s" % (
        "stage", "ranks", "step ms", "params B", "grads B", "optim B", "model st. B",
        "report MB", "ds RSS MB", "vs st.0"))
    base = {}
    for world in (1, 2, 4):
        for stage in (0, 1, 2, 3):
            if world == 1 and stage > 0:
                continue
            mbs = a.batch // world
            cfg = {"train_batch_size": a.batch, "train_micro_batch_size_per_gpu": mbs,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                   "zero_optimization": {"stage": stage,
                                         "stage3_param_persistence_threshold": 0}}
            cfg_path = os.path.join(work, "cfg.json")
            json.dump(cfg, open(cfg_path, "w"))
            plan = os.path.join(work, "z%d_w%d.dsplan" % (stage, world))
            common = [onnx_path, "--config", cfg_path, "--world-size", str(world), "--loss",
                      "softmax-cross-entropy", "--input-shape", "idx=%d,%d" % (mbs, a.seq)]
            run(["ds-opt"] + common + ["-o", plan])
            # ds-opt's prediction of everything a rank holds (states, arena, I/O).
            predicted = int(re.search(r"total\s+(\d+) B", run(["ds-opt"] + common + ["--report"]))
                            .group(1)) / 2**20
            log = os.path.join(work, "log.jsonl")
            cmd = ["ds-run", plan, "--data", data, "--steps", str(a.steps), "--log", log,
                   "--rank-report", "--threads", str(a.threads)]
            out = run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd)
            reps = [json.loads(l) for l in out.splitlines() if l.startswith('{"rank"')]
            times = sorted(json.loads(l)["time"] for l in open(log))[: max(1, a.steps - 1)]
            ms = 1e3 * times[len(times) // 2]
            r0 = reps[0]
            states = r0["param_bytes"] + r0["grad_bytes"] + r0["optimizer_bytes"]
            # What ds holds: peak RSS less the process before the plan was
            # mapped (libraries, MPI).
            rss = max(r["peak_rss_bytes"] - r["start_rss_bytes"] for r in reps) / 2**20
            if stage == 0:
                base[world] = states
            print("%-6d %-5d %10.1f %12d %12d %12d %12d %10.1f %10.1f %8.2fx" % (
                stage, world, ms, r0["param_bytes"], r0["grad_bytes"], r0["optimizer_bytes"],
                states, predicted, rss, states / base[world]))
            if stage <= 1 and (world > 1 or stage == 0):
                peer = torch_peer(a, data, world, "zero1" if stage else "ddp")
                print("%-6s %-5d %10.1f   ds/torch step time %.2fx" % (
                    "torch" + ("Z1" if stage else ""), world, peer, ms / peer))
    print("model states per rank follow DeepSpeed's formulas in fp32 (params 4, grads 4, Adam 8 "
          "bytes per parameter): stage 0: 16 Psi; 1: 8 Psi + 8 Psi/N; 2: 4 Psi + 12 Psi/N; "
          "3: 16 Psi/N (plus padding to N blocks and the untrained buffers)")

    # The schedule knobs at 2 ranks: collectives per step and bytes
    # (ds-opt --report), the activation arena they cost, step time, and how
    # much of the communication the compute hides (--trace, rank 0).
    print()
    print("%-34s %10s %8s %12s %12s %10s %9s" % (
        "ZeRO schedule (2 ranks)", "step ms", "colls", "comm B/step", "arena B", "comm ms",
        "hidden"))
    trace_dir = a.trace or work
    os.makedirs(trace_dir, exist_ok=True)
    variants = [
        ("stage 2, DeepSpeed defaults", 2, {}),
        ("stage 2, 1e5 buckets, overlap_comm", 2, {"reduce_bucket_size": 100000,
                                                   "allgather_bucket_size": 100000,
                                                   "overlap_comm": True}),
        ("stage 3, release, no prefetch", 3, {"stage3_max_reuse_distance": 0,
                                              "stage3_prefetch_bucket_size": 0}),
        ("stage 3, release, prefetch 5e7", 3, {"stage3_max_reuse_distance": 0}),
        ("stage 3, DeepSpeed defaults", 3, {}),
    ]
    for name, stage, knobs in variants:
        mbs = a.batch // 2
        zero = {"stage": stage, "stage3_param_persistence_threshold": 0}
        zero.update(knobs)
        cfg = {"train_batch_size": a.batch, "train_micro_batch_size_per_gpu": mbs,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": zero}
        cfg_path = os.path.join(work, "cfg.json")
        json.dump(cfg, open(cfg_path, "w"))
        common = [onnx_path, "--config", cfg_path, "--world-size", "2", "--loss",
                  "softmax-cross-entropy", "--input-shape", "idx=%d,%d" % (mbs, a.seq)]
        plan = os.path.join(work, "sched.dsplan")
        run(["ds-opt"] + common + ["-o", plan])
        report = run(["ds-opt"] + common + ["--report"])
        colls = sum(int(n) for n in re.findall(
            r"(?:train_step|optimizer_step): (?:all_gather|reduce_scatter)\s+\d+ B.*?(\d+) coll",
            report))
        volume = sum(int(n) for n in re.findall(
            r"(?:train_step|optimizer_step): (?:all_gather|reduce_scatter|all_reduce)\s+(\d+) B",
            report))
        arena = int(re.search(r"activations \(arena\)\s+(\d+) B", report).group(1))
        log = os.path.join(work, "log.jsonl")
        trace = os.path.join(trace_dir, re.sub(r"\W+", "_", name).strip("_") + ".json")
        run(MPIRUN + ["-np", "2", "ds-run", plan, "--data", data, "--steps", str(a.steps), "--log",
                      log, "--threads", str(a.threads), "--trace", trace])
        times = sorted(json.loads(l)["time"] for l in open(log))[: max(1, a.steps - 1)]
        busy, hidden, _ = hidden_share(trace)
        print("%-34s %10.1f %8d %12d %12d %10.1f %8.0f%%" % (
            name, 1e3 * times[len(times) // 2], colls, volume, arena, busy / 1e3 / a.steps,
            100 * hidden))


if __name__ == "__main__":
    main()
