# A small U-Net (convolutions, max-pool down, nn.Upsample up, skip
# concatenations, a per-pixel class head) as PyTorch exports it: its
# upsampling is ONNX Resize, which ds imports as gathers and products with
# compile-time taps, so it trains by ds's autodiff. Trained by ds and by
# PyTorch from the same weights and batches (AdamW, clipping), the per-step
# losses agree (relative error <= 1e-4 over 15 steps), for bilinear and
# nearest upsampling. Compiled for inference, the same export resamples in
# one ds.resample per upsampling, channels-last between the channels-last
# convolutions (one transpose, where the network enters them: the head's
# permute to classes-last cancels the exit's), and matches PyTorch's output.
# REQUIRES: torch, compiler
# RUN: %python %s --workdir %t
import copy
import os
import sys
sys.path.insert(0, "%s/../lib" % __file__.rsplit("/", 1)[0])
import numpy as np
import torch
import torch.nn.functional as F
from e2e import parse_args, run
from train_reference import compare, train_ds, train_torch

args = parse_args()
os.makedirs(args.workdir, exist_ok=True)
classes, size = 3, 16


def block(cin, cout):
    return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.ReLU())


class UNet(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.enc1, self.enc2, self.mid = block(3, 8), block(8, 16), block(16, 16)
        up = dict(scale_factor=2, mode=mode)
        if mode == "bilinear":
            up["align_corners"] = False
        self.up1, self.up2 = torch.nn.Upsample(**up), torch.nn.Upsample(**up)
        self.dec2, self.dec1 = block(32, 8), block(16, 8)
        self.head = torch.nn.Conv2d(8, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        # Classes last, where ds's softmax-cross-entropy loss takes them.
        return self.head(d1).permute(0, 2, 3, 1)  # [N, H, W, classes]


def seg_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, classes), labels.reshape(-1))


rng = np.random.default_rng(2)
data = {"x": rng.standard_normal((16, 3, size, size)).astype(np.float32),
        "labels": rng.integers(0, classes, (16, size, size)).astype(np.int64)}
cfg = {
    "train_batch_size": 4, "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.01}},
}
for mode in ("bilinear", "nearest"):
    torch.manual_seed(4)
    model = UNet(mode)
    work = os.path.join(args.workdir, mode)
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "unet.onnx")
    initial = copy.deepcopy(model)  # the exported weights (training changes model's)
    torch.onnx.export(copy.deepcopy(model), (torch.zeros(4, 3, size, size),), onnx_path,
                      input_names=["x"], output_names=["logits"], opset_version=17)
    ops = {n.op_type for n in __import__("onnx").load(onnx_path).graph.node}
    assert "Resize" in ops, ops
    ds_losses = train_ds(onnx_path, cfg, data, 15, work)
    torch_losses = train_torch(model, cfg, data, 15, seg_loss)
    compare("unet " + mode, ds_losses, torch_losses)

    # Inference: the trained export's upsampling as ds.resample, channels-last.
    plan = os.path.join(work, "unet.dsplan")
    run(["ds-opt", onnx_path, "-o", plan])
    x = data["x"][:4]
    np.save(os.path.join(work, "x.npy"), x)
    run(["ds-run", plan, "--inputs", os.path.join(work, "x.npy"), "--outputs",
         os.path.join(work, "y.npy")])
    got = np.load(os.path.join(work, "y.npy"))
    with torch.no_grad():
        want = initial.eval()(torch.from_numpy(x)).numpy()
    err = float(np.abs(got - want).max() / np.abs(want).max())
    steps = run(["ds-run", plan, "--dump"]).splitlines()
    resamples = [l for l in steps if "= resample(" in l]
    transposes = [l for l in steps if "= transpose(" in l]
    print("unet %s inference: relative error %.2e, %d resample steps (%s), %d transposes"
          % (mode, err, len(resamples), "; ".join(l.split("{")[1].split("}")[0] for l in resamples),
             len(transposes)))
    assert err < 1e-5, err
    assert len(resamples) == 2 and all("axes=[1,2]" in l for l in resamples), resamples
    # (The head's permute to [N, H, W, classes] cancels the exit transpose.)
    assert len(transposes) == 1, transposes
