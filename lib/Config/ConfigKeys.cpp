//===- ConfigKeys.cpp - the DeepSpeed config key table and its check -----===//
#include "ds/Config/ConfigKeys.h"

#include <set>

#include "ds/Config/DeepSpeedConfig.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"

using namespace mlir::ds;
namespace json = llvm::json;

namespace {

constexpr KeyUse H = KeyUse::Honoured, I = KeyUse::Inert, R = KeyUse::Refused;

// Contexts: what a key needs around it to be read.
#define OPT(type) "{\"optimizer\": {\"type\": \"" type "\"}}"
#define SCHED(type, params) "{\"scheduler\": {\"type\": \"" type "\", \"params\": " params "}}"
#define ZERO(stage) "{\"zero_optimization\": {\"stage\": " #stage "}}"
#define SGD "{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}}}"
#define TP "{\"tensor_parallel\": {\"autotp_size\": 1}}"
#define ELASTIC                                                                                    \
  "{\"elasticity\": {\"enabled\": true, \"max_train_batch_size\": 64, \"micro_batch_sizes\": "   \
  "[2, 4], \"min_gpus\": 1, \"max_gpus\": 4}}"

const ConfigKey kKeys[] = {
    // Batch sizes.
    {"train_batch_size", H, "8", "", "the global batch; DeepSpeed's arithmetic with the other two (any two give the third)"},
    {"train_micro_batch_size_per_gpu", H, "4", "", "the micro batch per data-parallel rank; \"auto\": the model's input batch"},
    {"gradient_accumulation_steps", H, "2", "", "micro-steps per optimizer step"},
    {"gradient_clipping", H, "1.0", "", "global-norm clip (DeepSpeed's default 1.0; 0 disables)"},
    {"steps_per_print", H, "10", "", "rank 0 prints a progress line every N steps"},
    {"wall_clock_breakdown", H, "true", "", "per-step forward/backward/step/collective times with each progress line"},
    {"dump_state", I, "false", "", "DeepSpeed prints its state at start; ds-opt --report shows the plan"},
    {"prescale_gradients", I, "false", "", "ds averages gradients in fp32 (or communication_data_type) already"},
    {"gradient_predivide_factor", I, "1.0", "", "as prescale_gradients"},
    {"wandb", I, "{\"enabled\": false}", "", "a Python service; csv_monitor and tensorboard write the same events"},
    {"zero_allow_untested_optimizer", I, "true", "", "ds's optimizers are its own fused kernels"},
    {"zero_force_ds_cpu_optimizer", I, "true", "", "an offloaded ds optimizer is always its CPU kernel"},
    // Optimizer.
    {"optimizer", H, "{\"type\": \"AdamW\"}", "", "the optimizer section"},
    {"optimizer.type", H, "\"AdamW\"", "", "Adam, AdamW, Lamb, SGD, Lion, Adagrad, Muon, OneBitAdam, ZeroOneAdam, OneBitLamb (case-insensitive)"},
    {"optimizer.params", H, "{}", OPT("AdamW"), "the optimizer's parameters"},
    {"optimizer.params.lr", H, "0.001", OPT("AdamW"), "learning rate (both halves of Muon)"},
    {"optimizer.params.betas", H, "[0.9, 0.999]", OPT("AdamW"), "moment decays"},
    {"optimizer.params.eps", H, "1e-8", OPT("AdamW"), "denominator epsilon (at least the smallest normal float)"},
    {"optimizer.params.weight_decay", H, "0.01", OPT("AdamW"), "weight decay (decoupled for AdamW, Adam by default, Lion, Muon)"},
    {"optimizer.params.bias_correction", H, "true", OPT("AdamW"), "Adam's and Lamb's bias correction; ignored by the 1-bit optimizers, as DeepSpeed"},
    {"optimizer.params.amsgrad", H, "false", OPT("AdamW"), "false only"},
    {"optimizer.params.adam_w_mode", H, "false", OPT("Adam"), "Adam's decoupled (true, default) or L2 weight decay"},
    {"optimizer.params.torch_adam", I, "true", OPT("Adam"), "the same arithmetic (torch.optim.Adam(W) instead of FusedAdam)"},
    {"optimizer.params.fused", I, "true", "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"torch_adam\": true}}}", "torch.optim.Adam's implementation switch (with torch_adam)"},
    {"optimizer.params.foreach", I, "true", "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"torch_adam\": true}}}", "as fused"},
    {"optimizer.params.capturable", I, "false", "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"torch_adam\": true}}}", "as fused"},
    {"optimizer.params.differentiable", I, "false", "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"torch_adam\": true}}}", "as fused"},
    {"optimizer.params.maximize", R, "true", "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"torch_adam\": true}}}", "ds minimizes the loss (false accepted)"},
    {"optimizer.params.momentum", H, "0.9", SGD, "SGD's momentum; Muon's momentum (0.95)"},
    {"optimizer.params.dampening", H, "0.0", SGD, "SGD's dampening"},
    {"optimizer.params.nesterov", H, "true", "{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1, \"momentum\": 0.9}}}", "SGD's Nesterov momentum"},
    {"optimizer.params.lr_decay", R, "0.1", OPT("Adagrad"), "Adagrad's lr_decay: 0 only"},
    {"optimizer.params.initial_accumulator_value", R, "0.1", OPT("Adagrad"), "Adagrad's: 0 only"},
    {"optimizer.params.max_coeff", H, "10.0", OPT("Lamb"), "Lamb's trust-ratio clamp (and OneBitLamb's)"},
    {"optimizer.params.min_coeff", H, "0.01", OPT("Lamb"), "as max_coeff"},
    {"optimizer.params.eps_inside_sqrt", H, "true", OPT("Lamb"), "Lamb's sqrt(v + eps); ignored by the 1-bit optimizers"},
    {"optimizer.params.max_grad_norm", R, "1.0", OPT("Lamb"), "refused as DeepSpeed does (use gradient_clipping); ignored by the 1-bit optimizers"},
    {"optimizer.params.muon_lr", H, "0.02", OPT("Muon"), "Muon's half's rate"},
    {"optimizer.params.adam_lr", H, "0.0003", OPT("Muon"), "Muon's Adam half's rate"},
    {"optimizer.params.ns_method", H, "\"standard\"", OPT("Muon"), "gram or standard (ds runs the quintic iteration in f32)"},
    {"optimizer.params.per_head_muon", R, "true", OPT("Muon"), "ds orthogonalizes whole matrices (false accepted)"},
    {"optimizer.params.freeze_step", H, "10", OPT("OneBitAdam"), "1-bit Adam's and 1-bit LAMB's warm-up"},
    {"optimizer.params.cuda_aware", I, "false", OPT("OneBitAdam"), "ds sends the bits over its own communicator"},
    {"optimizer.params.comm_backend_name", I, "\"mpi\"", OPT("OneBitAdam"), "nccl, mpi, hccl or compressed: as cuda_aware"},
    {"optimizer.params.var_freeze_step", H, "10", OPT("ZeroOneAdam"), "0/1 Adam's variance freeze"},
    {"optimizer.params.var_update_scaler", H, "16", OPT("ZeroOneAdam"), "0/1 Adam's variance-interval doubling"},
    {"optimizer.params.local_step_scaler", H, "32678", OPT("ZeroOneAdam"), "0/1 Adam's local-step-interval doubling"},
    {"optimizer.params.local_step_clipper", H, "16", OPT("ZeroOneAdam"), "0/1 Adam's largest local-step interval"},
    {"optimizer.params.coeff_beta", H, "0.9", OPT("OneBitLamb"), "1-bit LAMB's frozen-ratio decay"},
    {"optimizer.params.factor_max", H, "4.0", OPT("OneBitLamb"), "1-bit LAMB's factor clamp"},
    {"optimizer.params.factor_min", H, "0.5", OPT("OneBitLamb"), "as factor_max"},
    {"optimizer.params.factor_threshold", H, "0.1", OPT("OneBitLamb"), "1-bit LAMB's factor change per step"},
    // Scheduler.
    {"scheduler", H, "{\"type\": \"WarmupLR\"}", "", "the learning-rate schedule section"},
    {"scheduler.type", H, "\"WarmupLR\"", "", "WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest"},
    {"scheduler.params", H, "{}", "{\"scheduler\": {\"type\": \"WarmupLR\"}}", "the schedule's parameters"},
    {"scheduler.params.warmup_min_lr", H, "0.0", SCHED("WarmupLR", "{}"), "warm-up start"},
    {"scheduler.params.warmup_max_lr", H, "0.001", SCHED("WarmupLR", "{}"), "warm-up end"},
    {"scheduler.params.warmup_num_steps", H, "100", SCHED("WarmupLR", "{}"), "warm-up length (at least 2, as DeepSpeed)"},
    {"scheduler.params.warmup_type", H, "\"linear\"", SCHED("WarmupLR", "{}"), "log or linear"},
    {"scheduler.params.total_num_steps", H, "2000", SCHED("WarmupDecayLR", "{}"), "the decaying schedules' length"},
    {"scheduler.params.warmup_min_ratio", H, "0.0", SCHED("WarmupCosineLR", "{\"total_num_steps\": 2000}"), "WarmupCosineLR's start ratio"},
    {"scheduler.params.cos_min_ratio", H, "0.0001", SCHED("WarmupCosineLR", "{\"total_num_steps\": 2000}"), "WarmupCosineLR's floor"},
    {"scheduler.params.last_batch_iteration", R, "10", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "-1 only (--resume continues a schedule)"},
    {"scheduler.params.cycle_min_lr", H, "0.001", SCHED("OneCycle", "{\"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.cycle_max_lr", H, "0.01", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001}"), "OneCycle's"},
    {"scheduler.params.decay_lr_rate", H, "0.001", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.cycle_first_step_size", H, "100", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.cycle_second_step_size", H, "100", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.cycle_first_stair_count", H, "0", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.cycle_second_stair_count", H, "0", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.decay_step_size", H, "10", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.cycle_momentum", H, "true", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's beta1 cycling (Adam, AdamW)"},
    {"scheduler.params.cycle_min_mom", H, "0.8", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.cycle_max_mom", H, "0.9", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.decay_mom_rate", H, "0.0", SCHED("OneCycle", "{\"cycle_min_lr\": 0.001, \"cycle_max_lr\": 0.01}"), "OneCycle's"},
    {"scheduler.params.lr_range_test_min_lr", H, "0.001", SCHED("LRRangeTest", "{}"), "LRRangeTest's"},
    {"scheduler.params.lr_range_test_step_size", H, "100", SCHED("LRRangeTest", "{}"), "LRRangeTest's"},
    {"scheduler.params.lr_range_test_step_rate", H, "1.0", SCHED("LRRangeTest", "{}"), "LRRangeTest's"},
    {"scheduler.params.lr_range_test_staircase", H, "true", SCHED("LRRangeTest", "{}"), "LRRangeTest's"},
    // ZeRO.
    {"zero_optimization", H, "{\"stage\": 1}", "", "ZeRO"},
    {"zero_optimization.stage", H, "2", "", "0 to 3: optimizer state, gradients, parameters partitioned over data-parallel ranks"},
    {"zero_optimization.reduce_bucket_size", H, "50000000", ZERO(2), "gradient reduction bucket (elements)"},
    {"zero_optimization.allgather_bucket_size", H, "50000000", ZERO(2), "parameter all-gather bucket (elements)"},
    {"zero_optimization.overlap_comm", H, "true", ZERO(2), "issue collectives early so they overlap compute"},
    {"zero_optimization.contiguous_gradients", H, "true", ZERO(2), "gradient blocks placed contiguously"},
    {"zero_optimization.reduce_scatter", H, "true", ZERO(2), "true only (ds always reduce-scatters into the partitions)"},
    {"zero_optimization.sub_group_size", H, "1000000", ZERO(3), "the unit of the offloaded optimizer step"},
    {"zero_optimization.stage3_param_persistence_threshold", H, "100000", ZERO(3), "smaller parameters stay whole at stage 3"},
    {"zero_optimization.stage3_prefetch_bucket_size", H, "50000000", ZERO(3), "stage 3 prefetch (elements)"},
    {"zero_optimization.stage3_max_live_parameters", H, "1000000000", ZERO(3), "stage 3 gathered-parameter budget"},
    {"zero_optimization.stage3_max_reuse_distance", H, "1000000000", ZERO(3), "stage 3 keeps a gathered parameter this close to its next use"},
    {"zero_optimization.zero_quantized_weights", H, "true", ZERO(3), "ZeRO++ qwZ: stage 3's parameter all-gathers send int8 blocks of 256 with a scale each"},
    {"zero_optimization.zero_hpz_partition_size", R, "2", ZERO(3), "ZeRO++ hpZ (1 accepted)"},
    {"zero_optimization.zero_quantized_gradients", H, "true", ZERO(3), "ZeRO++ qgZ: stage 3's gradient reduce-scatters send int8 blocks of 256 with a scale each in one all-to-all, summed in f32"},
    {"zero_optimization.zero_quantized_nontrainable_weights", R, "true", ZERO(3), "frozen parameters (false accepted)"},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", I, "true", ZERO(3), "whole weights come from --zero-to-fp32 / --export-onnx"},
    {"zero_optimization.gather_16bit_weights_on_model_save", I, "true", ZERO(3), "as above"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", I, "true", ZERO(3), "as above"},
    {"zero_optimization.allgather_partitions", I, "true", ZERO(2), "ds always gathers partitions after the update"},
    {"zero_optimization.load_from_fp32_weights", I, "true", ZERO(2), "checkpoints keep fp32 state"},
    {"zero_optimization.elastic_checkpoint", I, "true", ZERO(2), "checkpoints reshard to any world size"},
    {"zero_optimization.ignore_unused_parameters", I, "true", ZERO(2), "unused parameters are not gathered"},
    {"zero_optimization.round_robin_gradients", I, "true", ZERO(2), "ds's host transfers are planned"},
    {"zero_optimization.cpu_offload", H, "true", ZERO(2), "DeepSpeed's older offload_optimizer {device: cpu}"},
    {"zero_optimization.offload_optimizer", H, "{\"device\": \"cpu\"}", ZERO(2), "ZeRO-Offload of optimizer state and step"},
    {"zero_optimization.offload_optimizer.device", H, "\"cpu\"", ZERO(2), "none, cpu or nvme"},
    {"zero_optimization.offload_optimizer.nvme_path", H, "\"/tmp\"", "{\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"nvme\"}}}", "the swap directory"},
    {"zero_optimization.offload_optimizer.pin_memory", I, "true", ZERO(2), "host buffers are ds's own"},
    {"zero_optimization.offload_optimizer.buffer_count", H, "4", ZERO(2), "swap buffers in flight"},
    {"zero_optimization.offload_optimizer.ratio", H, "0.5", "{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\"}}}", "share of the optimizer step offloaded (ZeRO-3)"},
    {"zero_optimization.offload_optimizer.fast_init", I, "true", ZERO(2), "ds initializes state when the plan loads"},
    {"zero_optimization.offload_optimizer.pipeline_read", I, "true", ZERO(2), "ds overlaps swaps by plan"},
    {"zero_optimization.offload_optimizer.pipeline_write", I, "true", ZERO(2), "as pipeline_read"},
    {"zero_optimization.offload_optimizer.pipeline", I, "true", ZERO(2), "as pipeline_read"},
    {"zero_optimization.offload_param", H, "{\"device\": \"cpu\"}", ZERO(3), "ZeRO-Infinity parameter offload"},
    {"zero_optimization.offload_param.device", H, "\"cpu\"", ZERO(3), "none, cpu or nvme"},
    {"zero_optimization.offload_param.nvme_path", H, "\"/tmp\"", "{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\"}}}", "the swap directory"},
    {"zero_optimization.offload_param.pin_memory", I, "true", ZERO(3), "host buffers are ds's own"},
    {"zero_optimization.offload_param.buffer_count", H, "5", ZERO(3), "parameter swap buffers"},
    {"zero_optimization.offload_param.buffer_size", H, "100000000", ZERO(3), "parameter swap buffer size (elements)"},
    {"zero_optimization.offload_param.max_in_cpu", H, "1000000000", ZERO(3), "parameters kept in host memory"},
    {"aio", H, "{}", "", "the NVMe swapper"},
    {"aio.block_size", H, "1048576", "", "I/O size (a multiple of 4096)"},
    {"aio.queue_depth", H, "8", "", "I/Os in flight"},
    {"aio.thread_count", I, "1", "", "io_uring submits and reaps on the calling thread"},
    {"aio.intra_op_parallelism", I, "1", "", "as thread_count"},
    {"aio.single_submit", I, "false", "", "as thread_count"},
    {"aio.overlap_events", I, "true", "", "as thread_count"},
    {"aio.use_gds", R, "true", "", "GPUDirect Storage (false accepted)"},
    // Precision.
    {"bf16", H, "{\"enabled\": true}", "", "bf16 mixed precision (fp32 master weights)"},
    {"bf16.enabled", H, "true", "", "on or off"},
    {"bf16.immediate_grad_update", I, "true", "", "ds accumulates in fp32"},
    {"bf16.check_grad_overflow", I, "true", "", "ds checks every step"},
    {"bf16.bf16_master_weights_and_grads", R, "true", "", "false only"},
    {"bf16.bf16_optimizer_states", R, "true", "", "false only"},
    {"bfloat16", H, "{\"enabled\": true}", "", "bf16's old name"},
    {"bfloat16.enabled", H, "true", "", "as bf16.enabled"},
    {"bfloat16.immediate_grad_update", I, "true", "", "as bf16's"},
    {"bfloat16.check_grad_overflow", I, "true", "", "as bf16's"},
    {"bfloat16.bf16_master_weights_and_grads", R, "true", "", "false only"},
    {"bfloat16.bf16_optimizer_states", R, "true", "", "false only"},
    {"fp16", H, "{\"enabled\": true}", "", "fp16 mixed precision with DeepSpeed's loss scaler"},
    {"fp16.enabled", H, "true", "", "on or off"},
    {"fp16.loss_scale", H, "0", "", "0: dynamic"},
    {"fp16.initial_scale_power", H, "16", "", "the dynamic scale's start, 2^N"},
    {"fp16.loss_scale_window", H, "1000", "", "overflow-free steps before the scale grows"},
    {"fp16.hysteresis", H, "2", "", "overflows tolerated before it shrinks"},
    {"fp16.consecutive_hysteresis", H, "true", "", "hysteresis refilled on each good step"},
    {"fp16.min_loss_scale", H, "1", "", "the scale's floor"},
    {"fp16.auto_cast", R, "true", "", "false only"},
    {"fp16.fp16_master_weights_and_grads", R, "true", "", "false only"},
    {"communication_data_type", H, "\"fp32\"", "", "the type gradient reductions send"},
    {"data_types", H, "{}", "", "DeepSpeed's data types section"},
    {"data_types.grad_accum_dtype", H, "\"fp32\"", "", "the gradient accumulators' type"},
    {"seq_parallel_communication_data_type", I, "\"fp32\"", "", "sequence parallelism is not in ds"},
    // Monitoring and profiling.
    {"csv_monitor", H, "{\"enabled\": true}", "", "DeepSpeed's CSV events of loss, lr, scale"},
    {"csv_monitor.enabled", H, "true", "", "on or off"},
    {"csv_monitor.output_path", H, "\"\"", "", "the directory"},
    {"csv_monitor.job_name", H, "\"job\"", "", "the subdirectory"},
    {"tensorboard", H, "{\"enabled\": true}", "", "the same events as a TensorBoard event file"},
    {"tensorboard.enabled", H, "true", "", "on or off"},
    {"tensorboard.output_path", H, "\"\"", "", "the directory"},
    {"tensorboard.job_name", H, "\"job\"", "", "the subdirectory"},
    {"flops_profiler", H, "{\"enabled\": true}", "", "DeepSpeed's FLOPs profile at one step"},
    {"flops_profiler.enabled", H, "true", "", "on or off"},
    {"flops_profiler.profile_step", H, "2", "", "the profiled step"},
    {"flops_profiler.module_depth", H, "-1", "", "module depth of the table"},
    {"flops_profiler.top_modules", H, "3", "", "modules per depth"},
    {"flops_profiler.detailed", H, "true", "", "the slowest steps too"},
    {"flops_profiler.output_file", H, "null", "", "a file instead of stdout"},
    {"flops_profiler.recompute_fwd_factor", I, "0.0", "", "accepted"},
    {"comms_logger", H, "{\"enabled\": true}", "", "DeepSpeed's collective table with each progress line"},
    {"comms_logger.enabled", H, "true", "", "on or off (DeepSpeed 0.19.8 turns it on whenever the section is present)"},
    {"comms_logger.verbose", H, "true", "", "each collective as it ends"},
    {"comms_logger.prof_all", H, "false", "", "every collective, or only prof_ops"},
    {"comms_logger.prof_ops", H, "[\"all_reduce\"]", "", "collectives logged without prof_all"},
    {"comms_logger.debug", H, "true", "", "the program each serves"},
    {"memory_breakdown", I, "true", "", "ds-opt --report prints the breakdown"},
    // Activation checkpointing and parallelism.
    {"activation_checkpointing", H, "{}", "", "recomputation, a checkpoint per layer"},
    {"activation_checkpointing.partition_activations", H, "true", "", "checkpoints split over tensor-parallel ranks"},
    {"activation_checkpointing.cpu_checkpointing", H, "true", "", "checkpoints in host memory"},
    {"activation_checkpointing.number_checkpoints", H, "2", "", "checkpoints kept"},
    {"activation_checkpointing.contiguous_memory_optimization", I, "true", "", "a static arena places them contiguously already"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", I, "true", "", "accepted"},
    {"activation_checkpointing.profile", I, "true", "", "accepted"},
    {"tensor_parallel", H, "{\"autotp_size\": 1}", "", "AutoTP training"},
    {"tensor_parallel.autotp_size", H, "1", "", "ranks per model replica"},
    {"tensor_parallel.tp_overlap_comm", I, "true", TP, "accepted"},
    {"tensor_parallel.preset_model", I, "\"llama\"", TP, "ds finds the splits from the graph"},
    {"tensor_parallel.tp_size", R, "2", TP, "DeepSpeed-Inference's key: a training config names the ranks in autotp_size"},
    {"tensor_parallel.partition_config", R, "{}", TP, "ds finds the column- and row-parallel pairs itself"},
    {"elasticity", H, "{\"enabled\": false}", "", "DeepSpeed's elastic batch arithmetic"},
    {"elasticity.enabled", H, "true", ELASTIC, "on or off"},
    {"elasticity.max_train_batch_size", H, "64", ELASTIC, "DeepSpeed's"},
    {"elasticity.micro_batch_sizes", H, "[2, 4]", ELASTIC, "DeepSpeed's"},
    {"elasticity.min_gpus", H, "1", ELASTIC, "DeepSpeed's"},
    {"elasticity.max_gpus", H, "4", ELASTIC, "DeepSpeed's"},
    {"elasticity.min_time", H, "0", ELASTIC, "DeepSpeed's"},
    {"elasticity.prefer_larger_batch", H, "true", ELASTIC, "DeepSpeed's"},
    {"elasticity.version", H, "0.2", ELASTIC, "DeepSpeed's"},
    {"elasticity.model_parallel_size", H, "1", ELASTIC, "DeepSpeed's"},
    {"elasticity.num_gpus_per_node", H, "1", ELASTIC, "DeepSpeed's"},
    {"elasticity.ignore_non_elastic_batch_info", H, "true", ELASTIC, "DeepSpeed's"},
    // Accepted without effect; refused features.
    {"load_universal_checkpoint", I, "true", "", "every checkpoint loads into any layout"},
    {"graph_harvesting", I, "true", "", "CUDA graphs"},
    {"use_data_before_expert_parallelism", I, "true", "", "MoE is not in ds"},
    {"compile", I, "{}", "", "ds compiles the whole step ahead of time"},
    {"nebula", I, "{}", "", "ds writes its own checkpoints"},
    {"eigenvalue", I, "{}", "", "read by DeepSpeed only inside quantize_training"},
    {"sparse_gradients", R, "true", "", "ds reduces embedding gradients dense (false accepted)"},
    {"checkpoint", H, "{}", "", "checkpoint options"},
    {"checkpoint.tag_validation", H, "\"Fail\"", "", "Ignore, Warn (default) or Fail: ranks saving a checkpoint compare its tag and warn or stop on a mismatch"},
    {"checkpoint.load_universal", I, "true", "", "every checkpoint loads into any layout"},
    {"checkpoint.use_node_local_storage", I, "true", "", "accepted"},
    {"checkpoint.parallel_write", I, "{}", "", "accepted"},
    {"checkpoint.writer", I, "{}", "", "accepted"},
    {"hybrid_engine", R, "{\"enabled\": true}", "", "the RLHF hybrid engine (refused while enabled)"},
    {"weight_quantization", R, "{\"enabled\": true}", "", "use ds-opt --quantize (refused while enabled)"},
    {"quantize_training", R, "{\"enabled\": true}", "", "quantization-aware training (refused while enabled)"},
    {"progressive_layer_drop", R, "{\"enabled\": true}", "", "refused while enabled"},
    {"torch_autocast", R, "{\"enabled\": true}", "", "use the bf16 or fp16 section (refused while enabled)"},
    {"amp", R, "{\"enabled\": true}", "", "NVIDIA apex AMP (refused while enabled)"},
    {"pipeline", R, "{\"enabled\": true}", "", "pipeline parallelism is not built yet (refused while enabled)"},
    {"compression_training", R, "{\"enabled\": true}", "", "not built yet (refused while enabled)"},
    {"sparse_attention", R, "{\"enabled\": true}", "", "not built yet (refused while enabled)"},
    {"curriculum_learning", R, "{\"enabled\": true}", "", "not built yet (refused while enabled)"},
    {"data_efficiency", R, "{\"enabled\": true}", "", "not built yet (refused while enabled)"},
    {"autotuning", R, "{\"enabled\": true}", "", "not built yet (refused while enabled)"},
};

#undef OPT
#undef SCHED
#undef ZERO
#undef ELASTIC
#undef SGD
#undef TP

const char *useName(KeyUse u) {
  return u == KeyUse::Honoured ? "honoured" : u == KeyUse::Inert ? "accepted, no effect" : "refused";
}

/// `path` set to `value` in `root`, creating objects on the way.
void setPath(json::Object &root, llvm::StringRef path, json::Value value) {
  auto [head, rest] = path.split('.');
  if (rest.empty()) {
    root[head] = std::move(value);
    return;
  }
  json::Value *sub = root.get(head);
  if (!sub || !sub->getAsObject()) {
    root[head] = json::Object();
    sub = root.get(head);
  }
  setPath(*sub->getAsObject(), rest, std::move(value));
}

/// `from` merged into `into`, objects recursively.
void merge(json::Object &into, const json::Object &from) {
  for (const auto &kv : from) {
    json::Value *mine = into.get(kv.first);
    if (mine && mine->getAsObject() && kv.second.getAsObject())
      merge(*mine->getAsObject(), *kv.second.getAsObject());
    else
      into[kv.first] = kv.second;
  }
}

} // namespace

llvm::ArrayRef<ConfigKey> mlir::ds::deepSpeedConfigKeys() { return kKeys; }

std::string mlir::ds::configKeysMarkdown() {
  std::string out =
      "<!-- Generated by ds-opt --print-config-keys from lib/Config/ConfigKeys.cpp; do not edit. -->\n"
      "# DeepSpeed config keys\n\n"
      "Every key of a DeepSpeed 0.19 `ds_config.json` that ds reads, and what it does with it:\n"
      "**honoured** (as DeepSpeed), **accepted, no effect** (type-checked; why in the note) or\n"
      "**refused** (an error naming the key; the note says what is accepted or what to use).\n"
      "A key not listed is an error with a \"did you mean\" suggestion. The table is checked\n"
      "against the reader (`ds-opt --check-config-keys`, a test); defaults and details are in\n"
      "[training.md](../training.md#deepspeed-config-keys-and-defaults).\n\n"
      "| key | ds | note |\n|---|---|---|\n";
  for (const ConfigKey &k : kKeys)
    out += std::string("| `") + k.path + "` | " + useName(k.use) + " | " + k.note + " |\n";
  return out;
}

std::vector<std::string> mlir::ds::checkConfigKeys() {
  std::vector<std::string> problems;
  std::set<std::string> listed, read;
  for (const ConfigKey &k : kKeys)
    if (!listed.insert(k.path).second) problems.push_back(std::string(k.path) + ": listed twice");
  for (const ConfigKey &k : kKeys) {
    const std::string where = std::string(k.path) + ": ";
    json::Object root;
    // Elasticity computes the batch sizes; everything else gets a batch.
    if (!llvm::StringRef(k.path).starts_with("elasticity.")) root["train_batch_size"] = 8;
    if (*k.context) {
      llvm::Expected<json::Value> ctx = json::parse(k.context);
      if (!ctx || !ctx->getAsObject()) {
        if (!ctx) llvm::consumeError(ctx.takeError());
        problems.push_back(where + "the context is not a JSON object");
        continue;
      }
      merge(root, *ctx->getAsObject());
    }
    llvm::Expected<json::Value> sample = json::parse(k.sample);
    if (!sample) {
      llvm::consumeError(sample.takeError());
      problems.push_back(where + "the sample is not JSON");
      continue;
    }
    setPath(root, k.path, std::move(*sample));
    std::string text, error;
    llvm::raw_string_ostream os(text);
    os << json::Value(std::move(root));
    std::set<std::string> keys = configKeysRead(text, /*worldSize=*/2, &error);
    read.insert(keys.begin(), keys.end());
    if (!keys.count(k.path))
      problems.push_back(where + "the reader never asks for it (" + text + ")");
    if (llvm::StringRef(error).contains("unknown key"))
      problems.push_back(where + "read as unknown: " + error);
    else if (k.use == KeyUse::Refused &&
             (error.empty() || !llvm::StringRef(error).contains(k.path)))
      problems.push_back(where + "listed as refused, but " +
                         (error.empty() ? std::string("the sample is accepted") : "the error is: " + error));
    else if (k.use != KeyUse::Refused && !error.empty())
      problems.push_back(where + "the sample " + k.sample + " is refused: " + error);
  }
  for (const std::string &path : read)
    if (!listed.count(path)) problems.push_back(path + ": read, but not in the key table");
  return problems;
}
