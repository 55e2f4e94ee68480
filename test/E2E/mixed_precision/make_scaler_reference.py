"""Records DeepSpeed's own DynamicLossScaler / LossScaler decisions for
scripted overflow patterns: test/E2E/mixed_precision.py makes ds overflow
on exactly those steps and compares. Run in bench/.venv (DeepSpeed from
PyPI, DS_BUILD_OPS=0 pip install deepspeed):

  bench/.venv/bin/python test/E2E/mixed_precision/make_scaler_reference.py \
      test/E2E/mixed_precision/scaler_reference.json
"""
import json
import sys

import deepspeed
import deepspeed.comm as dist
from deepspeed.runtime.fp16.loss_scaler import CreateLossScaler
from deepspeed.runtime.precision_config import DeepSpeedFP16Config
import torch

dist.get_rank = lambda *a, **k: 0  # the scaler logs on rank 0; no process group here

CASES = [
    {"name": "hysteresis", "steps": 14, "overflow": [2, 3, 4, 9],
     "fp16": {"enabled": True, "initial_scale_power": 4, "loss_scale_window": 2, "hysteresis": 2,
              "min_loss_scale": 1}},
    {"name": "consecutive", "steps": 16, "overflow": [1, 3, 5, 6, 7, 12],
     "fp16": {"enabled": True, "initial_scale_power": 5, "loss_scale_window": 3, "hysteresis": 3,
              "consecutive_hysteresis": True, "min_loss_scale": 2}},
    {"name": "at_minimum", "steps": 4, "overflow": [0, 1],
     "fp16": {"enabled": True, "initial_scale_power": 1, "loss_scale_window": 100, "hysteresis": 1,
              "min_loss_scale": 1}},
    {"name": "static", "steps": 5, "overflow": [1, 2],
     "fp16": {"enabled": True, "loss_scale": 64}},
]


def record(case):
    cfg = DeepSpeedFP16Config(**case["fp16"])
    dynamic = cfg.loss_scale == 0
    scaler = CreateLossScaler(torch.float16, cfg.loss_scale, dynamic, cfg.dynamic_loss_scale_args())
    out = []
    for step in range(case["steps"]):
        overflow = step in case["overflow"]
        used = float(scaler.loss_scale)
        try:
            scaler.update_scale(overflow)
        except Exception as e:  # DeepSpeed: "Current loss scale already at minimum ..."
            out.append({"loss_scale": used, "skipped": overflow, "error": str(e)})
            break
        out.append({"loss_scale": used, "skipped": overflow})
    return dict(case, deepspeed=deepspeed.__version__, trace=out)


json.dump([record(c) for c in CASES], open(sys.argv[1], "w"), indent=1)
