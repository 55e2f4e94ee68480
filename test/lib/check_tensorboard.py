"""Checks a ds tensorboard event file (tensorboard_events.read) against the
csv_monitor files written beside it: same tags, steps and values."""
import csv
import glob
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensorboard_events

tb_dir, csv_dir = sys.argv[1:3]
files = glob.glob(os.path.join(tb_dir, "events.out.tfevents.*"))
assert len(files) == 1, files
version, scalars = tensorboard_events.read(files[0])
print("version", version)
by_tag = {}
for tag, step, value in scalars:
    by_tag.setdefault(tag, []).append((step, value))
for tag in ("Train/Samples/lr", "Train/Samples/train_loss"):
    print("%s: steps %s" % (tag, " ".join(str(s) for s, _ in by_tag[tag])))
for tag, rows in by_tag.items():
    name = tag.replace("/", "_").replace(" ", "_") + ".csv"
    with open(os.path.join(csv_dir, name)) as f:
        want = [(int(r[0]), float(r[1])) for r in list(csv.reader(f))[1:]]
    got = [(s, v) for s, v in rows]
    assert len(got) == len(want), (tag, got, want)
    for (gs, gv), (ws, wv) in zip(got, want):
        assert gs == ws and abs(gv - wv) <= 1e-6 * max(1.0, abs(wv)), (tag, got, want)
print("events equal the csv_monitor's")
