# SIGTERM during training (preemption): ds-run finishes the step in flight,
# saves a checkpoint, exits with 75 (EX_TEMPFAIL), and --resume continues
# with the same losses an uninterrupted run has.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import json
import os
import shutil
import signal
import subprocess
import sys
import time
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
from e2e import parse_args
from torch_models import MLP

args = parse_args()
w = args.workdir
shutil.rmtree(w, ignore_errors=True)
os.makedirs(w)
torch.manual_seed(0)
torch.onnx.export(MLP(d_in=32, hidden=256), (torch.zeros(64, 32),), os.path.join(w, "mlp.onnx"),
                  input_names=["x"], output_names=["logits"], opset_version=17)
rng = np.random.default_rng(0)
np.savez(os.path.join(w, "data.npz"), x=rng.standard_normal((256, 32)).astype(np.float32),
         labels=rng.integers(0, 10, 256).astype(np.int64))
plan = os.path.join(w, "train.dsplan")
subprocess.run(["ds-opt", os.path.join(w, "mlp.onnx"), "--loss", "softmax-cross-entropy", "-o", plan], check=True)
steps = "1500"
full = os.path.join(w, "full.jsonl")
subprocess.run(["ds-run", plan, "--data", os.path.join(w, "data.npz"), "--steps", steps, "--log", full],
               check=True)
ck = os.path.join(w, "ckpt")
log = os.path.join(w, "part.jsonl")
p = subprocess.Popen(["ds-run", plan, "--data", os.path.join(w, "data.npz"), "--steps", steps,
                      "--log", log, "--checkpoint-dir", ck], stderr=subprocess.PIPE, text=True)
# Wait for a few steps, then preempt.
deadline = time.time() + 60
while time.time() < deadline and (not os.path.exists(log) or len(open(log).readlines()) < 5):
    time.sleep(0.01)
p.send_signal(signal.SIGTERM)
err = p.communicate(timeout=60)[1]
assert p.returncode == 75, (p.returncode, err)
assert "checkpoint saved, continue with --resume" in err, err
done = len(open(log).readlines())
latest = open(os.path.join(ck, "latest")).read().strip()
assert latest == "step_%08d" % done, (latest, done)
subprocess.run(["ds-run", plan, "--data", os.path.join(w, "data.npz"), "--steps", steps, "--log", log,
                "--checkpoint-dir", ck, "--resume"], check=True, capture_output=True)
got = [json.loads(l)["loss"] for l in open(log)]
want = [json.loads(l)["loss"] for l in open(full)]
assert got == want, "losses differ after preemption and resume"

# Preemption at arbitrary points: a signal must never land in a compute
# thread (it once corrupted the heap inside oneDNN ~1 run in 20).
rng_t = np.random.default_rng(1)
# Checkpointing removes only what it wrote under --checkpoint-dir: the rest
# of the directory (plan, data, logs) is left as it was.
before = {f: open(os.path.join(w, f), "rb").read() for f in os.listdir(w)
          if os.path.isfile(os.path.join(w, f))}
for i in range(8):
    cki = os.path.join(w, "ckpt%d" % i)
    logi = os.path.join(w, "part%d.jsonl" % i)
    q = subprocess.Popen(["ds-run", plan, "--data", os.path.join(w, "data.npz"), "--steps", steps,
                          "--log", logi, "--checkpoint-dir", cki], stderr=subprocess.PIPE, text=True)
    while not os.path.exists(logi) or not open(logi).read():
        time.sleep(0.005)
    time.sleep(rng_t.uniform(0.0, 0.3))
    q.send_signal(signal.SIGTERM)
    err = q.communicate(timeout=60)[1]
    assert q.returncode == 75, (i, q.returncode, err)
    n = len(open(logi).readlines())
    assert open(os.path.join(cki, "latest")).read().strip() == "step_%08d" % n, (i, n)
after = {f: open(os.path.join(w, f), "rb").read() for f in before if os.path.exists(os.path.join(w, f))}
assert after == before, "preempted runs changed files outside their checkpoint directories: %s" % (
    sorted(f for f in before if after.get(f) != before[f]))
print("preempted after step %d of %s; resumed run matches the uninterrupted one" % (done, steps))
