"""Checks a --trace file (per-rank, per-stream tracks with collectives) and
that the tensor-parallel outputs match the expected ones."""
import json
import sys

import numpy as np

trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"]
spans = [e for e in events if e["ph"] == "X"]
ranks = sorted({e["pid"] for e in spans})
threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
           if e["ph"] == "M" and e["name"] == "thread_name"}
streams = sorted({threads[(e["pid"], e["tid"])] for e in spans})
per_rank = {r: sum(1 for e in spans if e["pid"] == r and e["name"] == "all_reduce") for r in ranks}
assert all(e["dur"] >= 0 and "bytes" in e["args"] for e in spans), "spans need a duration and bytes"
assert len(set(per_rank.values())) == 1, per_rank
got, want = np.load(sys.argv[2]), np.load(sys.argv[3])
err = max(float(np.abs(got[k] - want[k]).max() / np.abs(want[k]).max()) for k in want)
print("ranks %s; streams %s; %d all_reduce per rank; outputs %s"
      % (",".join(map(str, ranks)), ",".join(sorted(streams, key=lambda s: s != "compute")),
         per_rank[0], "match" if err < 1e-5 else "differ (%.3g)" % err))
