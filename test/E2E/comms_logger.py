# DeepSpeed's comms_logger: ZeRO-2 training on 2 ranks prints, with each
# progress line, DeepSpeed's table of the collectives (its header, ops under
# DeepSpeed's names, one row per message size) whose counts, sizes and
# total latencies are those of the collectives the run's Chrome trace
# records, with DeepSpeed's bus/algorithmic bandwidth ratio ((n-1)/n on 2
# ranks); `verbose` prints one line per collective; `prof_all: false` logs
# only `prof_ops`; `debug` names the program each collective serves.
# REQUIRES: torch, compiler, mpi
# RUN: rm -rf %t && %python %s --workdir %t
import collections
import json
import os
import re
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
from e2e import MPIRUN, parse_args, run
from train_reference import gpt_training_setup

args = parse_args()
data_path, onnx_path, _ = gpt_training_setup(args.workdir, 6)
HEADER = ("Comm. Op            Message Size        Count               Total Latency(ms)   "
          "Avg Latency(ms)     tput_avg (Gbps)     busbw_avg (Gbps)    ")
DS_NAME = {"all_reduce": "all_reduce", "all_gather": "all_gather_into_tensor",
           "reduce_scatter": "reduce_scatter_tensor"}


def size_string(n):  # DeepSpeed's convert_size
    if n == 0:
        return "0B"
    i = 0
    while n >= 1024 ** (i + 1):
        i += 1
    return "%s %s" % (round(n / 1024 ** i, 2), ("B", "KB", "MB", "GB")[i])


def train(name, logger, steps=4, trace=None):
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    cfg = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, "steps_per_print": 2,
           "zero_optimization": {"stage": 2}, "comms_logger": logger}
    json.dump(cfg, open(os.path.join(work, "c.json"), "w"))
    plan = os.path.join(work, "t.dsplan")
    run(["ds-opt", onnx_path, "--config", os.path.join(work, "c.json"), "--world-size", "2",
         "--loss", "softmax-cross-entropy", "--input-shape", "idx=4,16", "-o", plan])
    cmd = MPIRUN + ["-np", "2", "ds-run", plan, "--data", data_path, "--steps", str(steps)]
    if trace:
        cmd += ["--trace", os.path.join(work, trace)]
    out = run(cmd)
    return out, work


def tables(out):
    """Each printed table: {op: {size string: (count, total, avg, tput, busbw)}}."""
    found, current, op = [], None, None
    for line in out.splitlines():
        if line.endswith(HEADER.rstrip()) or line == HEADER:
            current = collections.OrderedDict()
            found.append(current)
        elif current is not None and line and not line.startswith(" "):
            if line.startswith("step ") or line.startswith("["):
                current = None
                continue
            op = line.strip()
            current[op] = {}
        elif current is not None and line.startswith(" " * 20):
            cols = [line[i:i + 20].strip() for i in range(20, 140, 20)]
            current[op][cols[0]] = (int(cols[1]), *map(float, cols[2:]))
    return found


out, work = train("all", {"enabled": True}, trace="trace.json")
got = tables(out)
if len(got) != 2:
    sys.exit("expected a table with each of the 2 progress lines, got %d:\n%s" % (len(got), out))
final = got[-1]
# What the trace recorded on rank 0's communication thread.
events = [e for e in json.load(open(os.path.join(work, "trace.json")))["traceEvents"]
          if e.get("ph") == "X" and e.get("pid") == 0 and e.get("tid") == 1]
want = collections.defaultdict(lambda: [0, 0.0])
for e in events:
    key = (DS_NAME[e["name"]], size_string(e["args"]["bytes"]))
    want[key][0] += 1
    want[key][1] += e["dur"] / 1e3
table = {(op, size): row for op, sizes in final.items() for size, row in sizes.items()}
if set(table) != set(want):
    sys.exit("logged %s, the trace has %s" % (sorted(table), sorted(want)))
for key, (count, total) in want.items():
    row = table[key]
    print("%-24s %-10s count %3d (trace %3d)  total %.2f ms (trace %.2f)  tput %.2f busbw %.2f"
          % (key[0], key[1], row[0], count, row[1], total, row[3], row[4]))
    if row[0] != count:
        sys.exit("%s: count %d, the trace has %d" % (key, row[0], count))
    if abs(row[1] - total) > 0.05 + 0.05 * total:
        sys.exit("%s: total latency %.2f ms, the trace has %.2f" % (key, row[1], total))
    if row[3] >= 1.0 and abs(row[4] / row[3] - 0.5) > 0.02:
        sys.exit("%s: busbw / algbw %.3f, DeepSpeed's is (n-1)/n = 0.5" % (key, row[4] / row[3]))
# Every step runs the same collectives: the first table has half the counts.
for op, sizes in got[0].items():
    for size, row in sizes.items():
        if 2 * row[0] != final[op][size][0]:
            sys.exit("%s %s: %d after 2 steps, %d after 4" % (op, size, row[0], final[op][size][0]))
for op in ("reduce_scatter_tensor", "all_gather_into_tensor", "all_reduce"):
    if op not in final:
        sys.exit("ZeRO-2 runs %s, which the table lacks" % op)

# verbose, prof_ops and debug.
out, _ = train("some", {"enabled": True, "verbose": True, "debug": True, "prof_all": False,
                        "prof_ops": ["all_gather_into_tensor"]}, steps=2)
lines = [l for l in out.splitlines() if "comm op:" in l]
final = tables(out)[-1]
logged = sum(r[0] for sizes in final.values() for r in sizes.values())
if not lines or len(lines) != logged:
    sys.exit("verbose printed %d lines for %d logged collectives:\n%s" % (len(lines), logged, out))
pattern = (r"^\[Rank 0\] comm op: all_gather_into_tensor \| \[Caller Func: optimizer_step\] \| "
           r"time \(ms\): [0-9.]+ \| msg size: [0-9.]+ K?B \| algbw \(Gbps\): [0-9.]+ \| "
           r"busbw \(Gbps\): [0-9.]+$")
for l in lines:
    if not re.match(pattern, l.lstrip("\r").split("\x1b[K")[-1]):
        sys.exit("unexpected verbose line: %r" % l)
if list(final) != ["all_gather_into_tensor | [Caller Func: optimizer_step]"]:
    sys.exit("prof_ops selects all_gather_into_tensor only; logged %s" % list(final))
# Disabled: nothing.
out, _ = train("off", {"enabled": False}, steps=2)
if "Comm. Op" in out or "comm op:" in out:
    sys.exit("comms_logger disabled still printed:\n" + out)
print("comms_logger: tables, verbose lines and filters as DeepSpeed's")
