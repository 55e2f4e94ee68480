#!/usr/bin/env python3
"""Writes the node tests of the installed onnx release (PyPI's `onnx`,
which ships the generators but not the data) in libonnx-testdata's layout:
OUT/node/<test>/model.onnx and test_data_set_N/{input,output}_K.pb.

    gen_node_tests.py OUT

Run with the pinned onnx the test target installs (see test/CMakeLists.txt);
run_conformance.py --root OUT then runs them. A generator that fails (one
needing a package not installed) is reported and skipped, not fatal.
"""
import os
import sys

import onnx
from onnx import numpy_helper


def proto_of(value, vi):
    t = vi.type
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, vi.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, vi.name)
    if isinstance(value, onnx.TensorProto):
        return value
    return numpy_helper.from_array(value, vi.name)


def main():
    out = os.path.join(sys.argv[1], "node")
    os.makedirs(out, exist_ok=True)
    from onnx.backend.test.case import node
    cases = node.collect_testcases()
    written = 0
    for case in cases:
        d = os.path.join(out, case.name)
        try:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "model.onnx"), "wb") as f:
                f.write(case.model.SerializeToString())
            for i, (inputs, outputs) in enumerate(case.data_sets):
                ds = os.path.join(d, "test_data_set_%d" % i)
                os.makedirs(ds, exist_ok=True)
                for kind, values, infos in (("input", inputs, case.model.graph.input),
                                            ("output", outputs, case.model.graph.output)):
                    for j, v in enumerate(values):
                        with open(os.path.join(ds, "%s_%d.pb" % (kind, j)), "wb") as f:
                            f.write(proto_of(v, infos[j]).SerializeToString())
            written += 1
        except Exception as e:  # noqa: BLE001
            print("skipped %s: %s" % (case.name, e), file=sys.stderr)
    with open(os.path.join(sys.argv[1], "ONNX_VERSION"), "w") as f:
        f.write(onnx.__version__ + "\n")
    print("wrote %d node tests of onnx %s to %s" % (written, onnx.__version__, out))


if __name__ == "__main__":
    main()
