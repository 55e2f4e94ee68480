#!/usr/bin/env python3
"""ONNX backend test suite through ds-opt and ds-run.

For every test under /usr/share/libonnx-testdata/data/{node,simple,
pytorch-operator,pytorch-converted} (Debian's libonnx-testdata): compile
model.onnx with ds-opt, run test_data_set_0's inputs with ds-run, and
compare with its outputs (rtol 1e-3, atol 1e-7, ONNX's defaults; NaNs
must match). Inputs that decide shapes (Reshape's shape, Slice's starts,
...) are bound at compile time with ds-opt --bind-input, as onnx-mlir's
constant-input test variant does; everything else stays a run-time input.

One line per test (PASS, FAIL with the largest error, SKIP with ds-opt's
reason) and a closing "N passed, N failed, N skipped".

  run_conformance.py [--jobs 2] [--filter add] [--check EXPECTED] [--update EXPECTED]
                     [--docs docs/onnx-support.md] [--root DIR]

--root runs another copy of the suite in the same layout: the current onnx
release's node tests, written by gen_node_tests.py (run this script with
that onnx, which reads their newer element types).

--check fails when a test listed in EXPECTED stops passing or an unlisted
one starts passing (so the list is updated with the change that did it).
"""
import argparse
import collections
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = DEBIAN_ROOT = "/usr/share/libonnx-testdata/data"
SUITES = ["node", "simple", "pytorch-operator", "pytorch-converted"]
RTOL, ATOL = 1e-3, 1e-7
ENGINE = "ds"
# 16-bit outputs: two units in the type's last place, relative, and one
# absolute (values that cancel to near zero). ONNX's reference rounds after
# every op in 16 bits; ds sums products and reductions in f32 and rounds
# once, as 16-bit GEMMs do, so the two differ by an ulp or two.
TOL16 = {"float16": (2 * 2.0 ** -10, 2.0 ** -10), "bfloat16": (2 * 2.0 ** -7, 2.0 ** -7)}

# Tests excluded on purpose, with the reason (docs/onnx-support.md lists them).
EXCLUDED = {
    "node/test_cast_FLOAT_to_BFLOAT16":
        "ONNX 1.12's expected output truncates to bfloat16; ds rounds to nearest even, as PyTorch "
        "and newer ONNX releases do",
    "node/test_castlike_FLOAT_to_BFLOAT16":
        "test data bug in ONNX 1.12: the model declares 'like' as 3x4, the data holds 1 element",
    "node/test_castlike_FLOAT_to_BFLOAT16_expanded": "same test data bug as test_castlike_FLOAT_to_BFLOAT16",
    "node/test_castlike_BFLOAT16_to_FLOAT": "same test data bug as test_castlike_FLOAT_to_BFLOAT16",
    "node/test_castlike_BFLOAT16_to_FLOAT_expanded": "same test data bug as test_castlike_FLOAT_to_BFLOAT16",
}
# The bfloat16 entries above are ONNX 1.12's data bugs: a newer suite
# (gen_node_tests.py writes its version to ONNX_VERSION) runs them.
ONNX_112_DATA_BUGS = set(EXCLUDED)
# Training-mode Dropout's expected outputs come from numpy's random stream;
# ds draws its own (statistics checked in test/E2E/dropout.py), and these
# node tests run as inference plans, where Dropout is the identity.
for _t in ("test_training_dropout", "test_training_dropout_default",
           "test_training_dropout_default_mask", "test_training_dropout_mask"):
    EXCLUDED["node/" + _t] = ("expected output is one numpy random draw; ds draws its own masks "
                              "(statistics: test/E2E/dropout.py)")

# Ops whose outputs are random draws: the expected output is one numpy draw,
# which no other generator reproduces. Tests of them compare what the draw
# promises (shape, type, the support: Bernoulli's 0/1); the distributions
# are checked with a million samples in test/E2E/random_ops.py.
RANDOM_OPS = {"Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike"}


def compare_draws(expected, got):
    """(status, detail): `got` is a draw like `expected` (same shapes and
    types, values in the expected draw's support when that is 0/1)."""
    for oname, exp in expected.items():
        if oname not in got:
            return "FAIL", "missing output %s" % oname
        g = np.asarray(got[oname])
        if g.shape != exp.shape or g.dtype != exp.dtype:
            return "FAIL", "output %s is %s %s, expected %s %s" % (oname, g.dtype, g.shape,
                                                                   exp.dtype, exp.shape)
        if set(np.unique(exp).tolist()) <= {0, 1} and not set(np.unique(g).tolist()) <= {0, 1}:
            return "FAIL", "output %s holds values other than 0 and 1" % oname
    return "PASS", "a random draw: shapes, types and support compared"


# Node inputs (by op type and position) whose values decide output shapes.
SHAPE_INPUTS = {
    "Reshape": {1}, "Expand": {1}, "Slice": {1, 2, 3, 4}, "Squeeze": {1}, "Unsqueeze": {1},
    "ConstantOfShape": {0}, "Range": {0, 1, 2}, "Tile": {1}, "Pad": {1, 2, 3}, "TopK": {1},
    "DFT": {1, 2}, "STFT": {1, 3},
    "OneHot": {1}, "CumSum": {1}, "CumProd": {1}, "Trilu": {1}, "Split": {1}, "Resize": {1, 2, 3},
    "Upsample": {1}, "ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "ReduceMin": {1},
    "ReduceProd": {1}, "ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1},
    "ReduceLogSumExp": {1}, "ReduceSumSquare": {1}, "Clip": set(), "CenterCropPad": {1}, "AffineGrid": {1},
    # Control flow ds resolves at import: conditions and trip counts.
    "If": {0}, "Loop": {0, 1},
    # Which steps of a recurrent layer run.
    "RNN": {4}, "GRU": {4}, "LSTM": {4},
    # What selects elements, and image geometry.
    "Compress": {1}, "Col2Im": {1, 2}, "MaxUnpool": {2},
    # Not shapes, but what the graph computes: ds compiles one Dropout mode.
    "Dropout": {1, 2},
    "HannWindow": {0}, "HammingWindow": {0}, "BlackmanWindow": {0},
    "MelWeightMatrix": {0, 1, 2, 3, 4},
}


def save_npz(path, arrays):
    """numpy.savez, minus its quirks: it swallows an array named "like"
    (NumPy's array-function dispatch), which ONNX tests use as a name."""
    import io
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays.items():
            buf = io.BytesIO()
            np.save(buf, a, allow_pickle=False)
            z.writestr(name + ".npy", buf.getvalue())


# ml_dtypes' narrow types (newer onnx hands them): one element per byte.
NARROW_FLOATS = {"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                 "float8_e8m0fnu", "float4_e2m1fn"}
NARROW_INTS = {"int4": np.int8, "int2": np.int8, "uint4": np.uint8, "uint2": np.uint8}


def to_ds(a):
    """ds reads bfloat16 as its bits in uint16 (numpy has no bfloat16;
    newer onnx hands ml_dtypes' bfloat16, which .npy spells as void), and
    the float8/float4/int4/int2 types as their bytes in uint8."""
    if a.dtype.name == "bfloat16":
        return a.view(np.uint16)
    if a.dtype.name in NARROW_FLOATS or a.dtype.name in NARROW_INTS:
        return a.view(np.uint8)
    return a


def run_test(args):
    suite, name, ds_opt, ds_run = args
    d = os.path.join(ROOT, suite, name)
    key = "%s/%s" % (suite, name)
    if key in EXCLUDED and ENGINE == "ds":
        return key, "SKIP", "excluded: " + EXCLUDED[key]
    model_path = os.path.join(d, "model.onnx")
    data_dir = os.path.join(d, "test_data_set_0")
    if not os.path.exists(model_path) or not os.path.isdir(data_dir):
        return key, "SKIP", "no model or test data"
    try:
        model = onnx.load(model_path)
    except Exception as e:  # noqa: BLE001
        return key, "SKIP", "onnx cannot load it: %s" % e
    inits = {i.name for i in model.graph.initializer}
    graph_inputs = [i.name for i in model.graph.input if i.name not in inits]
    outputs = [o.name for o in model.graph.output]
    ops = sorted({n.op_type for n in model.graph.node})

    kinds = {v.name: v.type.WhichOneof("value") for v in list(model.graph.input) + list(model.graph.output)}

    def read(prefix, names):
        vals = {}
        files = sorted((f for f in os.listdir(data_dir) if f.startswith(prefix)),
                       key=lambda f: int(f[len(prefix):-3]))
        for i, f in enumerate(files):
            # Test data lists inputs and outputs in graph order; stored names
            # are sometimes stale, so position decides.
            name = names[i] if i < len(names) else f
            with open(os.path.join(data_dir, f), "rb") as fh:
                raw = fh.read()
            if kinds.get(name) == "sequence_type":
                t = onnx.SequenceProto()
                t.ParseFromString(raw)
                vals[name] = numpy_helper.to_list(t)
            elif kinds.get(name) == "optional_type":
                t = onnx.OptionalProto()
                t.ParseFromString(raw)
                vals[name] = numpy_helper.to_optional(t)
            else:
                t = onnx.TensorProto()
                t.ParseFromString(raw)
                vals[name] = numpy_helper.to_array(t)
        return vals

    try:
        inputs = read("input_", graph_inputs)
        expected = read("output_", outputs)
    except Exception as e:  # noqa: BLE001
        return key, "SKIP", "test data not readable: %s" % e
    compare_fn = compare_draws if RANDOM_OPS & set(ops) else compare
    if ENGINE == "onnxruntime":
        return (key,) + run_onnxruntime(model_path, inputs, expected, compare_fn)
    if any(not isinstance(v, np.ndarray) for v in list(inputs.values()) + list(expected.values())):
        return key, "SKIP", "sequence or optional graph inputs/outputs are not supported"
    if any(v.dtype.kind in "OUS" for v in list(inputs.values()) + list(expected.values())):
        return key, "SKIP", "string tensors are not supported"
    # Bind the graph inputs a shape-deciding operand is computed from
    # (directly, or through other nodes, as in the window functions'
    # expanded tests where Range's limit is derived from a `size` input).
    producer = {o: node for node in model.graph.node for o in node.output}
    bind, seen = set(), set()
    stack = [node.input[i] for node in model.graph.node
             for i in SHAPE_INPUTS.get(node.op_type, ()) if i < len(node.input) and node.input[i]]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in graph_inputs:
            bind.add(name)
        elif name in producer:
            stack.extend(i for i in producer[name].input if i)
    work = tempfile.mkdtemp(prefix="dsconf-")
    try:
        cmd = [ds_opt, model_path, "-o", os.path.join(work, "m.dsplan")]
        for b in sorted(bind):
            p = os.path.join(work, "bind_%d.npy" % len(cmd))
            np.save(p, to_ds(inputs[b]))
            cmd += ["--bind-input", "%s=%s" % (b, p)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            lines = [l for l in r.stderr.splitlines() if "error" in l and "cannot import" not in l]
            reason = (lines[0] if lines else r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "ds-opt failed")
            return key, "SKIP", reason.split("error: ", 1)[-1][:200] + "  [ops: %s]" % ",".join(ops)
        feed = {k: to_ds(v) for k, v in inputs.items() if k not in bind}
        save_npz(os.path.join(work, "in.npz"), feed)
        r = subprocess.run([ds_run, os.path.join(work, "m.dsplan"), "--inputs", os.path.join(work, "in.npz"),
                            "--outputs", os.path.join(work, "out.npz"), "--threads", "1"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return key, "FAIL", "ds-run: " + (r.stderr.strip().splitlines() or ["failed"])[-1][:200]
        try:
            got = dict(np.load(os.path.join(work, "out.npz")))
        except Exception as e:  # noqa: BLE001
            return key, "FAIL", "outputs not readable: %s" % e
        status, detail = compare_fn(expected, got)
        return key, status, detail
    except subprocess.TimeoutExpired:
        return key, "FAIL", "timed out"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_onnxruntime(model_path, inputs, expected, compare_fn):
    """The same test through onnxruntime (--engine onnxruntime), for the
    peer's count on the same files: a session that cannot be made is a
    SKIP, one that fails to run a FAIL, as for ds."""
    import onnxruntime as ort
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4  # failures are reported per test, not logged
        sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        return "SKIP", "onnxruntime: " + str(e).splitlines()[0][:200]
    try:
        outs = sess.run(None, inputs)
    except Exception as e:  # noqa: BLE001
        return "FAIL", "onnxruntime: " + str(e).splitlines()[0][:200]
    names = [o.name for o in sess.get_outputs()]
    return compare_fn(expected, dict(zip(names, outs)))


def compare(expected, got):
    """(status, detail) of outputs `got` against the test's `expected`."""
    worst = 0.0
    for oname, exp in expected.items():
        if oname not in got:
            return "FAIL", "missing output %s" % oname
        g = got[oname]
        if isinstance(exp, list) or exp is None or g is None or isinstance(g, list):
            # A sequence or optional output (onnxruntime's runs only).
            if (exp is None) != (g is None) or (isinstance(exp, list) and
                                                 (not isinstance(g, list) or len(g) != len(exp))):
                return "FAIL", "output %s differs in structure" % oname
            for k, (e1, g1) in enumerate(zip(exp, g) if isinstance(exp, list) else
                                          ([(exp, g)] if exp is not None else [])):
                status, detail = compare({"%s[%d]" % (oname, k): np.asarray(e1)},
                                         {"%s[%d]" % (oname, k): np.asarray(g1)})
                if status != "PASS":
                    return status, detail
            continue
        g = np.asarray(g)
        if exp.dtype.name == "bfloat16" and g.dtype == np.uint16:
            g = g.view(exp.dtype)
        # ds writes narrow floats as their bits (uint8) and 4-/2-bit integers
        # as int8/uint8 values: compare values, NaN equal to NaN.
        if exp.dtype.name in NARROW_FLOATS and g.dtype == np.uint8:
            g, exp = g.view(exp.dtype).astype(np.float32), exp.astype(np.float32)
            if g.shape == exp.shape and not np.array_equal(g, exp, equal_nan=True):
                return "FAIL", "output %s differs" % oname
        elif exp.dtype.name in NARROW_INTS and g.dtype == NARROW_INTS[exp.dtype.name]:
            exp = exp.astype(g.dtype)
        if g.shape != exp.shape:
            return "FAIL", "output %s has shape %s, expected %s" % (oname, g.shape, exp.shape)
        if g.dtype != exp.dtype:
            return "FAIL", "output %s is %s, expected %s" % (oname, g.dtype, exp.dtype)
        rtol, atol = TOL16.get(exp.dtype.name, (RTOL, ATOL))
        if exp.dtype.name == "bfloat16":
            g, exp = g.astype(np.float32), exp.astype(np.float32)
        if exp.dtype.kind in "fc":
            ok = np.allclose(g, exp, rtol=rtol, atol=atol, equal_nan=True)
            with np.errstate(invalid="ignore"):  # inf - inf where both are inf
                diff = np.abs(g.astype(np.float64) - exp)
            err = float(np.nanmax(np.where(np.isnan(diff), 0.0, diff))) if exp.size else 0.0
        else:
            ok = np.array_equal(g, exp)
            numeric = exp.dtype.kind in "iub" and g.dtype.kind in "iub"
            err = (float(np.abs(g.astype(np.float64) - exp.astype(np.float64)).max())
                   if exp.size and numeric else float(not ok))
        worst = max(worst, err)
        if not ok:
            return "FAIL", "output %s differs: max abs error %.3g" % (oname, err)
    return "PASS", "max abs error %.2g" % worst


def op_table(results):
    """Per op type: node tests passed / total (tests named test_<op>...)."""
    table = collections.defaultdict(lambda: [0, 0, set(), collections.Counter()])
    for key, (status, detail) in results.items():
        suite, name = key.split("/", 1)
        if suite != "node":
            continue
        model = onnx.load(os.path.join(ROOT, suite, name, "model.onnx"))
        ops = {n.op_type for n in model.graph.node}
        opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
        for op in ops:
            table[op][1] += 1
            table[op][0] += status == "PASS"
            table[op][2].add(opset)
            if status != "PASS":
                table[op][3][detail.split("  [ops")[0]] += 1
    return table


def write_docs(path, results, peer=None):
    """The per-op table; `peer` (results of --engine onnxruntime on the same
    files) adds onnxruntime's counts beside ds's."""
    table = op_table(results)
    peer_table = op_table(peer) if peer else {}
    passed = sum(s == "PASS" for s, _ in results.values())
    node_passed = sum(s == "PASS" for k, (s, _) in results.items() if k.startswith("node/"))
    node_total = sum(k.startswith("node/") for k in results)
    skips = collections.Counter(d.split("  [ops")[0] for s, d in results.values() if s == "SKIP")
    debian = os.path.realpath(ROOT) == os.path.realpath(DEBIAN_ROOT)
    if debian:
        suite = "ONNX backend tests (Debian's libonnx-testdata, onnx 1.12)"
        regen = "/usr/bin/python3 test/conformance/run_conformance.py --docs " + path
    else:
        version = open(os.path.join(ROOT, "ONNX_VERSION")).read().strip()
        suite = ("The node tests of onnx %s, the current release (written by "
                 "test/conformance/gen_node_tests.py into build/onnx-node-tests)" % version)
        regen = ("bench/.venv/bin/python test/conformance/run_conformance.py --root "
                 "build/onnx-node-tests --suites node --docs %s --compare-onnxruntime" % path)
    with open(path, "w") as f:
        f.write("<!-- Generated by test/conformance/run_conformance.py --docs; do not edit. -->\n")
        f.write("# ONNX support%s\n\n" % ("" if not debian else ": Debian's onnx 1.12 suite"))
        f.write("%s through ds-opt and ds-run: **%d of %d node tests pass**, %d tests in all"
                % (suite, node_passed, node_total, passed))
        if peer:
            peer_passed = sum(s == "PASS" for k, (s, _) in peer.items() if k.startswith("node/"))
            f.write("; onnxruntime %s passes %d of the same files through the same runner and "
                    "tolerances" % (__import__("onnxruntime").__version__, peer_passed))
        f.write(". Tolerances: rtol %g, atol %g; "
                "16-bit outputs two units in their last place (rtol 2^-9 and atol 2^-10 for "
                "float16, rtol 2^-6 and atol 2^-7 for bfloat16: ds sums in f32 and rounds once, "
                "the reference rounds after every op).\n\n" % (RTOL, ATOL))
        f.write("Regenerate: `%s`.\n\n" % regen)
        if not debian:
            f.write("Debian's older suite (node, simple and PyTorch tests of onnx 1.12): "
                    "[onnx-support-debian.md](onnx-support-debian.md).\n\n")
        f.write("ds-opt imports opsets 6 to 28 of the default domain, and opsets 1 to 5 for the ops "
                "unchanged since opset 1. A test counts for every op in its graph (the `_expanded` "
                "tests count for the ops of their function bodies). The last column gives ds-opt's "
                "reason for each test of the op that does not pass. Tests of random ops (%s) "
                "compare what a draw promises (shapes, types, Bernoulli's 0/1), not numpy's "
                "stream; test/E2E/random_ops.py checks the distributions.\n\n"
                % ", ".join(sorted(RANDOM_OPS)))
        if peer:
            f.write("| op | ds: node tests passed / total | onnxruntime passed | opsets of those "
                    "tests | tests not passing in ds: why |\n|---|---|---|---|---|\n")
        else:
            f.write("| op | node tests passed / total | opsets of those tests | tests not passing: why |\n"
                    "|---|---|---|---|\n")
        for op in sorted(table):
            p, t, opsets, why = table[op]
            reasons = "; ".join("%d × %s" % (k, r.replace("|", "\\|")) for r, k in why.most_common())
            ort = ("| %d " % peer_table[op][0] if op in peer_table else "| - ") if peer else ""
            f.write("| %s | %d / %d %s| %s | %s |\n"
                    % (op, p, t, ort, ", ".join(str(o) for o in sorted(opsets)), reasons))
        f.write("\n## Excluded on purpose\n\n")
        for k, why in sorted(EXCLUDED.items()):
            f.write("- `%s`: %s\n" % (k, why))
        f.write("\n## Why tests are skipped (ds-opt's reasons, most common first)\n\n")
        for reason, n in skips.most_common(60):
            f.write("- %d × %s\n" % (n, reason.replace("|", "\\|")))


def main():
    global ROOT, ENGINE
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--filter", default="")
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--ds-opt", default=shutil.which("ds-opt") or "build/bin/ds-opt")
    ap.add_argument("--ds-run", default=shutil.which("ds-run") or "build/bin/ds-run")
    ap.add_argument("--check", help="fail unless exactly the tests listed here pass")
    ap.add_argument("--update", help="write the passing tests here")
    ap.add_argument("--docs", help="write the per-op support table here")
    ap.add_argument("--compare-onnxruntime", action="store_true",
                    help="with --docs: also run onnxruntime on the same files, for its counts")
    ap.add_argument("--quiet", action="store_true", help="print only failures and the summary")
    ap.add_argument("--root", default=ROOT, help="the suite's directory (default: Debian's)")
    ap.add_argument("--engine", default="ds", choices=["ds", "onnxruntime"],
                    help="run the tests through ds (default) or onnxruntime (the peer's count)")
    args = ap.parse_args()
    ROOT = args.root
    ENGINE = args.engine
    if not os.path.isdir(ROOT):
        sys.exit("%s is missing: install Debian's libonnx-testdata" % ROOT)
    version_file = os.path.join(ROOT, "ONNX_VERSION")
    if os.path.exists(version_file) and not open(version_file).read().startswith("1.12"):
        for k in ONNX_112_DATA_BUGS:
            EXCLUDED.pop(k)
    tasks = []
    for suite in args.suites.split(","):
        if not os.path.isdir(os.path.join(ROOT, suite)):
            continue
        for name in sorted(os.listdir(os.path.join(ROOT, suite))):
            if args.filter in name:
                tasks.append((suite, name, os.path.abspath(args.ds_opt), os.path.abspath(args.ds_run)))
    with multiprocessing.Pool(args.jobs) as pool:
        results = {k: (s, d) for k, s, d in pool.imap_unordered(run_test, tasks)}
    counts = collections.Counter(s for s, _ in results.values())
    for key in sorted(results):
        status, detail = results[key]
        if not args.quiet or status == "FAIL":
            print("%-4s %s: %s" % (status, key, detail))
    passing = sorted(k for k, (s, _) in results.items() if s == "PASS")
    if args.update:
        with open(args.update, "w") as f:
            f.write("# Tests expected to pass (test/conformance/run_conformance.py --update)\n")
            f.writelines(p + "\n" for p in passing)
    if args.docs:
        peer = None
        if args.compare_onnxruntime:
            ENGINE = "onnxruntime"
            with multiprocessing.Pool(args.jobs) as pool:
                peer = {k: (s, d) for k, s, d in pool.imap_unordered(run_test, tasks)}
            ENGINE = "ds"
        write_docs(args.docs, results, peer)
    print("%d passed, %d failed, %d skipped" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
    if args.check:
        want = {l.strip() for l in open(args.check) if l.strip() and not l.startswith("#")}
        regressed = sorted(want - set(passing))
        new = sorted(set(passing) - want)
        for k in regressed:
            print("REGRESSED %s: %s" % (k, results.get(k, ("missing", ""))[1]))
        for k in new:
            print("NEWLY PASSING %s (add it with --update)" % k)
        if regressed or new:
            sys.exit(1)


if __name__ == "__main__":
    main()
