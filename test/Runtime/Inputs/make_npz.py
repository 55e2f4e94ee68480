"""make_npz.py OUT.npz name=dtype:shape[=fill] ... : writes test inputs."""
import sys

import numpy as np

arrays = {}
for spec in sys.argv[2:]:
    name, rest = spec.split("=", 1)
    fill = None
    if "=" in rest:
        rest, fill = rest.split("=")
    dtype, shape = rest.split(":")
    shape = tuple(int(d) for d in shape.split(",") if d)
    a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) - 2
    if fill is not None:
        a[...] = fill
    arrays[name] = a
if sys.argv[1].endswith(".npy"):
    np.save(sys.argv[1], next(iter(arrays.values())))
else:
    np.savez(sys.argv[1], **arrays)
