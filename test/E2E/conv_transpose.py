# torch.nn.ConvTranspose1d/2d with groups, strides, pads, output_padding and
# dilation, exported by torch.onnx, match PyTorch (ConvTranspose is imported
# as zero insertion + padding + a direct convolution with the flipped weight).
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
from e2e import export_and_compare, parse_args

args = parse_args()
torch.manual_seed(7)
rng = np.random.default_rng(7)
cases = {
    "ct2d": (torch.nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2),
                                      groups=2, dilation=(1, 2)), (2, 4, 5, 4)),
    "ct1d": (torch.nn.ConvTranspose1d(3, 5, 4, stride=2, padding=3, bias=False), (2, 3, 9)),
    "ct2d_same": (torch.nn.ConvTranspose2d(2, 3, 3, stride=1, padding=1), (1, 2, 6, 6)),
}
for name, (model, shape) in cases.items():
    x = rng.standard_normal(shape).astype(np.float32)
    export_and_compare(name, model, {"input": x}, args.workdir, 17, tol=1e-5)
