# torchvision's SqueezeNet, MobileNetV3 and ShuffleNetV2 (random weights,
# random batch-norm statistics) exported by torch.onnx match PyTorch within
# relative error 1e-4: conv with groups/strides/pads, ceil-mode max pooling,
# batch norm, hard-swish/sigmoid, channel shuffle, adaptive average pooling.
# REQUIRES: torch, torchvision, compiler
# RUN: %python %s --workdir %t
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torchvision
from e2e import export_and_compare, parse_args

args = parse_args()
torch.manual_seed(5)
gen = torch.Generator().manual_seed(5)
x = np.random.default_rng(5).standard_normal((2, 3, 224, 224)).astype(np.float32)
for name in ("squeezenet1_0", "mobilenet_v3_small", "shufflenet_v2_x0_5"):
    model = getattr(torchvision.models, name)(weights=None)
    # Default statistics (mean 0, var 1, identity affine) would hide a wrong
    # normalization; random ones make every batch norm count.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
    with torch.no_grad():
        export_and_compare(name, model, {"input": x}, args.workdir, 17, tol=1e-4)
