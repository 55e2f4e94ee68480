"""Writes deepspeed_values.json: the learning rate (and Adam's betas) of each
optimizer step under DeepSpeed's own OneCycle and LRRangeTest, as its engine
runs them (step 1 at the constructor's values, then scheduler.step() after
each applied step). Needs DeepSpeed (bench/.venv has it):

    bench/.venv/bin/python test/E2E/schedules/make_schedule_values.py
"""
import json
import os

import deepspeed
import torch
from deepspeed.runtime import lr_schedules

STEPS = 40
CASES = {
    "one_cycle": {"type": "OneCycle", "params": {
        "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-2, "cycle_first_step_size": 10,
        "cycle_second_step_size": 14, "decay_lr_rate": 0.5, "decay_step_size": 4,
        "cycle_min_mom": 0.85, "cycle_max_mom": 0.95, "decay_mom_rate": 0.01}},
    "one_cycle_stairs": {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.001, "cycle_max_lr": 0.006, "cycle_first_step_size": 12,
        "cycle_first_stair_count": 4, "cycle_second_stair_count": 3}},
    "one_cycle_no_momentum": {"type": "OneCycle", "params": {
        "cycle_min_lr": 0.002, "cycle_max_lr": 0.02, "cycle_first_step_size": 8,
        "cycle_momentum": False, "decay_lr_rate": 0.1, "decay_step_size": 2}},
    "lr_range_test": {"type": "LRRangeTest", "params": {
        "lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 5, "lr_range_test_step_rate": 2.0}},
    "lr_range_test_staircase": {"type": "LRRangeTest", "params": {
        "lr_range_test_min_lr": 2e-4, "lr_range_test_step_size": 6, "lr_range_test_step_rate": 1.5,
        "lr_range_test_staircase": True}},
}
out = {"deepspeed": deepspeed.__version__, "steps": STEPS, "cases": {}}
for name, sched in CASES.items():
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    s = getattr(lr_schedules, sched["type"])(opt, **sched["params"])
    lrs, beta1s, beta2s = [], [], []
    for _ in range(STEPS):
        g = opt.param_groups[0]
        lrs.append(g["lr"])
        beta1s.append(g["betas"][0])
        beta2s.append(g["betas"][1])
        s.step()
    out["cases"][name] = {"scheduler": sched, "lr": lrs, "beta1": beta1s, "beta2": beta2s}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepspeed_values.json")
json.dump(out, open(path, "w"), indent=1)
print("wrote", path)
