# Elastic training (DeepSpeed's elasticity section): the config gives one
# global batch (8) that 1, 2 and 4 data-parallel ranks train with (micro
# batch x accumulation steps chosen per size, as DeepSpeed's engine does);
# a run checkpointed at one valid size and resumed at another continues the
# loss curve of an uninterrupted run (rel <= 1e-5), with ZeRO-1 state
# resharded; a size the batch does not allow is an error naming the valid
# ones.
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import json
import os
import re
import shutil
import subprocess
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
from e2e import MPIRUN, parse_args, run
from train_reference import gpt_training_setup

args = parse_args()
work = args.workdir
data_path, onnx_path, _ = gpt_training_setup(work, seed=7, samples=32)
cfg = {"elasticity": {"enabled": True, "max_train_batch_size": 8, "micro_batch_sizes": [2, 4],
                      "max_gpus": 4, "min_time": 0, "version": 0.1},
       "gradient_clipping": 1.0, "zero_optimization": {"stage": 1},
       "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}}}
cfg_path = os.path.join(work, "ds_config.json")
with open(cfg_path, "w") as f:
    json.dump(cfg, f)


def fail(msg):
    sys.exit("FAIL: " + msg)


def compile_plan(ranks):
    plan = os.path.join(work, "w%d.dsplan" % ranks)
    report = run(["ds-opt", onnx_path, "--config", cfg_path, "--world-size", str(ranks),
                  "--data", data_path, "-o", plan, "--report"])
    m = re.search(r"batch: train_batch_size (\d+) = micro (\d+) x accumulation (\d+) x "
                  r"data-parallel (\d+) \(elasticity; the same global batch trains at "
                  r"data-parallel sizes ([\d ]+)\)", report)
    if not m:
        fail("--report should show the elastic batch:\n" + report)
    return plan, tuple(int(x) for x in m.groups()[:4]), m.group(5).split()


def train(plan, ranks, steps, log, ck, resume=False):
    cmd = ["ds-run", plan, "--data", data_path, "--steps", str(steps), "--log", log,
           "--checkpoint-dir", ck, "--checkpoint-every", "4"] + (["--resume"] if resume else [])
    run([*MPIRUN, "-np", str(ranks), *cmd] if ranks > 1 else cmd)
    return [json.loads(l)["loss"] for l in open(log)]


plans = {}
for ranks, want in ((1, (8, 4, 2, 1)), (2, (8, 4, 1, 2)), (4, (8, 2, 1, 4))):
    plan, got, sizes = compile_plan(ranks)
    print("%d ranks: train_batch_size %d = micro %d x accumulation %d x data-parallel %d"
          % ((ranks,) + got))
    if got != want or sizes != ["1", "2", "4"]:
        fail("%d ranks: batch %s, valid sizes %s; DeepSpeed's compute_elastic_config gives "
             "%s and [1, 2, 4]" % (ranks, got, sizes, want))
    plans[ranks] = plan

steps = 8
full = train(plans[1], 1, steps, os.path.join(work, "full.jsonl"), os.path.join(work, "ck-full"))
for first, then in ((2, 1), (1, 4)):
    ck = os.path.join(work, "ck-%d-%d" % (first, then))
    train(plans[first], first, 4, os.path.join(work, "first-%d-%d.jsonl" % (first, then)), ck)
    rest = train(plans[then], then, steps, os.path.join(work, "rest-%d-%d.jsonl" % (first, then)),
                 ck, resume=True)
    worst = max(abs(a - b) / abs(b) for a, b in zip(rest, full[4:]))
    print("saved at %d ranks, resumed at %d: steps 5-8 within %.2e of the uninterrupted run"
          % (first, then, worst))
    if len(rest) != 4 or worst > 1e-5:
        fail("the resumed run left the uninterrupted loss curve: %s vs %s" % (rest, full[4:]))

p = subprocess.run(["ds-opt", onnx_path, "--config", cfg_path, "--world-size", "3", "--data",
                    data_path, "-o", os.path.join(work, "w3.dsplan")], capture_output=True, text=True)
if p.returncode == 0 or "3 data-parallel ranks are not among the sizes global batch 8 trains " \
        "with: [1, 2, 4]" not in p.stderr:
    fail("3 ranks should be refused naming the valid sizes:\n" + p.stderr)
print("PASS")
