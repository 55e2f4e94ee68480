#!/usr/bin/env python3
"""ZeRO-Offload against DeepSpeed: the same GPT-style model, ds_config and
data, trained by ds (ds-opt + ds-run) and by DeepSpeed from PyPI (its CPU
accelerator, gloo, DeepSpeedCPUAdam), with offload_optimizer "none" and
"cpu" (ZeRO-2) and "nvme" (ZeRO-3, DeepSpeed's requirement; ds's swapper
read and write bandwidth against dd's on the same disk; DeepSpeed's NVMe
path needs its async_io op, built from Debian's libaio-dev), on 1 and 2
ranks. Prints the median step time and each rank's
resident memory growth (peak RSS less the RSS before the model existed),
ds's device/host split (ds-run --rank-report), and the ratios ds / DeepSpeed.

    bench/.venv/bin/python bench/offload_training.py [--d 512] [--layers 8] [--steps 8]
        [--worlds 1,2] [--offloads none,cpu,nvme]

The venv comes from `bash bench/peers.sh` (PyTorch 2.x, DeepSpeed). On a
machine without a GPU both runs keep "device" and host in one RAM: the
memory column compares what each system holds; ds's device column is the
bounded device pool its CPU backend plays (what a GPU would need).
"""
import argparse
import atexit
import copy
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "lib"))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
BIN = os.path.join(HERE, "..", "build", "bin")


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout[-3000:], r.stderr[-3000:]))
    return r.stdout


def rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def deepspeed_worker(a):
    """One DeepSpeed rank (started directly or by mpirun)."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    os.environ.update({"DS_ACCELERATOR": "cpu", "RANK": str(rank), "WORLD_SIZE": str(world),
                       "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": os.environ.get("DSB_PORT", "29561")})
    import numpy as np
    import torch
    import deepspeed
    from torch_models import GPT
    torch.set_num_threads(a.threads)
    start = current_rss()
    torch.manual_seed(0)
    model = GPT(vocab=a.vocab, ctx=a.seq, d=a.d, heads=8, layers=a.layers, tied=True)
    cfg = json.load(open(a.config))
    deepspeed.init_distributed(dist_backend="gloo")
    eng, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    data = np.load(a.data)
    tokens, labels = torch.from_numpy(data["idx"]), torch.from_numpy(data["labels"])
    mbs = cfg["train_micro_batch_size_per_gpu"]
    times, losses = [], []
    for step in range(a.steps):
        lo = (step * mbs * world + rank * mbs) % tokens.shape[0]
        x, y = tokens[lo:lo + mbs], labels[lo:lo + mbs]
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(eng(x).reshape(-1, a.vocab), y.reshape(-1))
        eng.backward(loss)
        eng.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    # One file per rank: mpirun interleaves the ranks' stdout.
    with open("%s.rank%d.json" % (a.config, rank), "w") as f:
        json.dump({"rank": rank, "times": times, "losses": losses,
                   "rss_growth": rss_bytes() - start}, f)


def deepspeed_run(a, cfg_path, data, world):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--config", cfg_path, "--data",
           data] + [x for k in ("d", "layers", "vocab", "seq", "steps", "threads")
                    for x in ("--" + k, str(getattr(a, k)))]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd, env=env)
    return [json.load(open("%s.rank%d.json" % (cfg_path, r))) for r in range(world)]


def ds_run(a, work, onnx_path, cfg_path, data, world, mbs):
    plan = os.path.join(work, "p.dsplan")
    common = [onnx_path, "--config", cfg_path, "--world-size", str(world), "--loss",
              "softmax-cross-entropy", "--input-shape", "idx=%d,%d" % (mbs, a.seq)]
    run([os.path.join(BIN, "ds-opt")] + common + ["-o", plan])
    log = os.path.join(work, "log.jsonl")
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    out = run((MPIRUN + ["-np", str(world)] if world > 1 else []) +
              [os.path.join(BIN, "ds-run"), plan, "--data", data, "--steps", str(a.steps), "--log",
               log, "--rank-report", "--threads", str(a.threads), "--quiet"], env=env)
    ranks = [json.loads(l) for l in out.splitlines() if l.startswith('{"rank"')]
    steps = [json.loads(l) for l in open(log)]
    return ranks, [s["time"] for s in steps], [s["loss"] for s in steps]


def disk_bandwidth(directory, mib=1024):
    """Sequential O_DIRECT write and read bandwidth of `directory`'s disk
    (dd, 1 MiB blocks), in GB/s: what the swapper's throughput is a fraction of."""
    path = os.path.join(directory, "dd.bin")
    rates = []
    for cmd in (["dd", "if=/dev/zero", "of=" + path, "bs=1M", "count=%d" % mib, "oflag=direct",
                 "conv=fsync"],
                ["dd", "if=" + path, "of=/dev/null", "bs=1M", "iflag=direct"]):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        rates.append(mib * 2**20 / (time.perf_counter() - t0) / 1e9)
    os.unlink(path)
    return rates


def median_after_warmup(times):
    t = sorted(times[2:] or times)
    return t[len(t) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4, help="global batch")
    ap.add_argument("--threads", type=int, default=0, help="threads per rank (0: 2 / ranks)")
    ap.add_argument("--worlds", default="1,2")
    ap.add_argument("--offloads", default="none,cpu,nvme")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--config", default="", help=argparse.SUPPRESS)
    ap.add_argument("--data", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return deepspeed_worker(a)
    import numpy as np
    import torch
    from torch_models import GPT
    work = tempfile.mkdtemp(prefix="ds-offload-bench-")
    atexit.register(shutil.rmtree, work, True)  # the model and data: ~1 GB
    torch.manual_seed(0)
    model = GPT(vocab=a.vocab, ctx=a.seq, d=a.d, heads=8, layers=a.layers, tied=True)
    psi = sum(p.numel() for p in model.parameters())
    onnx_path = os.path.join(work, "gpt.onnx")
    torch.onnx.export(copy.deepcopy(model), (torch.zeros(2, a.seq, dtype=torch.long),), onnx_path,
                      input_names=["idx"], output_names=["logits"], opset_version=17,
                      dynamo=False, dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
    tokens = np.random.default_rng(0).integers(0, a.vocab, (64, a.seq + 1)).astype(np.int64)
    data = os.path.join(work, "data.npz")
    np.savez(data, idx=tokens[:, :-1].copy(), labels=tokens[:, 1:].copy())
    print("GPT d=%d layers=%d vocab=%d seq=%d: %.1fM parameters; global batch %d, fp32, AdamW, "
          "ZeRO-2; %d steps, median of steps 3-%d" % (a.d, a.layers, a.vocab, a.seq, psi / 1e6,
                                                      a.batch, a.steps, a.steps))
    print("%-5s %-8s %10s %10s %8s %12s %12s %12s %9s %9s" % (
        "ranks", "offload", "ds ms", "DS ms", "ds/DS", "ds RSS MB", "DS RSS MB", "ds device MB",
        "ds host", "RSS ratio"))
    disk = disk_bandwidth(work)
    aio = subprocess.run([sys.executable, "-c", "from deepspeed.ops.op_builder import "
                          "AsyncIOBuilder; import sys; sys.exit(not AsyncIOBuilder()."
                          "is_compatible(verbose=False))"], capture_output=True,
                         env=dict(os.environ, DS_ACCELERATOR="cpu")).returncode == 0
    print("disk under %s: O_DIRECT sequential write %.2f GB/s, read %.2f GB/s (dd, 1 GiB)" % (
        work, disk[0], disk[1]))
    for world in [int(w) for w in a.worlds.split(",")]:
        threads = a.threads or max(1, 2 // world)
        a.threads = threads
        mbs = a.batch // world
        for offload in a.offloads.split(","):
            # DeepSpeed swaps optimizer state to NVMe at stage 3 only.
            stage = 3 if offload == "nvme" else 2
            section = {"device": offload, "pin_memory": False}
            if offload == "nvme":
                section["nvme_path"] = os.path.join(work, "nvme")
                os.makedirs(section["nvme_path"], exist_ok=True)
            cfg = {"train_batch_size": a.batch, "train_micro_batch_size_per_gpu": mbs,
                   "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01}},
                   "zero_optimization": {"stage": stage, "offload_optimizer": section}}
            cfg_path = os.path.join(work, "cfg_%s_%d.json" % (offload, world))
            json.dump(cfg, open(cfg_path, "w"))
            ranks, times, losses = ds_run(a, work, onnx_path, cfg_path, data, world, mbs)
            ds_ms = 1e3 * median_after_warmup(times)
            ds_rss = max(r["peak_rss_bytes"] - r["start_rss_bytes"] for r in ranks) / 2**20
            if offload == "nvme" and not aio:
                print("%-5d %-8s %10.1f  DeepSpeed: no async_io op (apt-get install libaio-dev)"
                      % (world, "nvme z3", ds_ms))
                continue
            peer = deepspeed_run(a, cfg_path, data, world)
            peer_ms = 1e3 * median_after_warmup(peer[0]["times"])
            peer_rss = max(r["rss_growth"] for r in peer) / 2**20
            dev = max(r["device_bytes"] for r in ranks) / 2**20
            host = max(r["host_bytes"] for r in ranks) / 2**20
            # ds logs the loss averaged over the ranks; DeepSpeed's is each rank's own.
            peer_loss = sum(r["losses"][0] for r in peer) / len(peer)
            drift = abs(losses[0] - peer_loss) / abs(peer_loss)
            print("%-5d %-8s %10.1f %10.1f %7.2fx %12.1f %12.1f %12.1f %8.1fM %8.2fx" % (
                world, offload + (" z3" if offload == "nvme" else ""), ds_ms, peer_ms,
                ds_ms / peer_ms, ds_rss, peer_rss, dev, host, ds_rss / peer_rss))
            if offload == "nvme":
                r0 = ranks[0]
                print("      ds NVMe: %.1f MB per rank, read %.2f GB/s, write %.2f GB/s "
                      "(%.2f / %.2f of dd's)" % (
                          r0["nvme_bytes"] / 2**20, r0["nvme_read_gbps"], r0["nvme_write_gbps"],
                          r0["nvme_read_gbps"] / disk[1], r0["nvme_write_gbps"] / disk[0]))
            if drift > 1e-3:
                print("  warning: first losses differ: ds %.6f, DeepSpeed %.6f" % (
                    losses[0], peer_loss))


if __name__ == "__main__":
    main()
