"""``python -m trainer`` / ``torchrun --nproc-per-node 8 -m trainer --tp 2 --pp 2 --dp 2 ...``.

Rank 0 prints one line per step, or with ``--json`` one JSON summary as its last stdout line
(``losses``, ``iteration_s``, ``world_size``, ``tp``, ``pp``, ``dp`` and the meta fields). Bad
input is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys

from trainer.config import (
    DP_REDUCE_MODES,
    DTYPES,
    FFN_KINDS,
    PRESET_NAMES,
    ParallelConfig,
    TrainConfig,
    load_config_file,
    preset,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainer", description=__doc__.splitlines()[0])
    p.add_argument("--config", help="YAML/JSON file of TrainConfig fields (flags override it)")
    p.add_argument("--model", default=None,
                   help=f"model preset ({', '.join(PRESET_NAMES)}; default tiny) or a transformers "
                        f"config.json (file or directory)")
    for flag in ("layers", "hidden", "heads", "seq", "vocab", "ffn-hidden", "kv-heads", "experts",
                 "top-k", "moe-ffn-hidden", "shared-experts", "first-dense-layers"):
        p.add_argument(f"--{flag}", type=int, help=f"override the model's {flag}")
    p.add_argument("--ffn", choices=FFN_KINDS, help="plain (fc1, GELU, fc2) or gated (SwiGLU)")
    p.add_argument("--untied", action="store_true", help="separate output head (default: tied)")
    p.add_argument("--tp", type=int, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=int, help="pipeline-parallel degree (default 1)")
    p.add_argument("--cp", type=int, help="context-parallel degree, ring attention (default 1)")
    p.add_argument("--ep", type=int, help="expert-parallel degree, part of dp (default 1)")
    p.add_argument("--dp", type=int, help="data-parallel degree (default: world / (tp x pp))")
    p.add_argument("--sp", action="store_true", default=None,
                   help="sequence parallelism with tp (Megatron: all-gather / reduce-scatter "
                   "over the sequence instead of all-reduce)")
    p.add_argument("--fsdp", action="store_true", default=None,
                   help="fully sharded data parallelism over dp: each block's parameters "
                   "gathered for its forward and backward, sharded at rest (trainer/fsdp.py)")
    p.add_argument("--stage-layers", metavar="N,N,...",
                   help="layers of each pipeline stage, e.g. 3,2 (default: even, or one fewer "
                   "on the first and last stage, Megatron-Core's rule)")
    p.add_argument("--order", help="rank order, innermost first (default tp-dp-pp, Megatron's)")
    p.add_argument("--micro-batches", type=int, help="micro-batches per iteration (default 1)")
    p.add_argument("--micro-batch-size", "--micro-batch", dest="micro_batch_size", type=int,
                   help="sequences per micro-batch (a size, as netsim predict's --micro-batch); "
                   "sets --micro-batches from the global batch, or the global batch from it")
    p.add_argument("--global-batch", type=int, help="sequences per iteration (default dp x micro-batches)")
    p.add_argument("--steps", type=int, help="iterations in total (default 10)")
    p.add_argument("--seed", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--dtype", choices=DTYPES)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"))
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument("--dp-reduce", choices=DP_REDUCE_MODES)
    p.add_argument("--bucket-mb", type=float, help="gradient bucket size in MiB (default 25)")
    p.add_argument("--trace-dir", help="write trace-rank{R}.jsonl and summary.json here")
    p.add_argument("--peak-flops", type=float, help="peak FLOP/s of one device, for MFU")
    p.add_argument("--save", dest="save_dir", help="checkpoint directory to write")
    p.add_argument("--save-every", type=int, help="checkpoint every N steps (default: at the end)")
    p.add_argument("--load", dest="load_dir", help="resume from the newest checkpoint here")
    p.add_argument("--placement", help='rank-to-host JSON {"ranks": [{"rank","host","local_rank"}]}')
    p.add_argument("--host", help="this machine's host name in the placement (default hostname)")
    p.add_argument("--profile", dest="profile_dir", metavar="DIR",
                   help="write torch.profiler Chrome traces DIR/kineto-rank{R}.json")
    p.add_argument("--profile-schedule", metavar="W,U,A",
                   help="profiler wait, warmup, active steps (default 1,1,3)")
    p.add_argument("--inject-slow-rank", action="append", metavar="R[:F]",
                   help="fault injection: rank R's compute takes F (default --slow-factor) "
                   "times longer; repeat for several ranks")
    p.add_argument("--slow-factor", type=float, metavar="F", help="with --inject-slow-rank (1.0)")
    p.add_argument("--inject-slow-link", metavar="R:PEER",
                   help="fault injection: R's sends to PEER take --link-delay-us longer")
    p.add_argument("--link-delay-us", type=float, metavar="D",
                   help="with --inject-slow-link, microseconds per call (0)")
    p.add_argument("--json", action="store_true", help="rank 0 prints a JSON summary last")
    return p


def config_from_args(args: argparse.Namespace, world_size: int) -> TrainConfig:
    """Merge --config, the preset and the flags into a validated TrainConfig."""
    base = load_config_file(args.config) if args.config else None
    model = _model_from_args(args, base.model if base else preset("tiny"))
    bp = base.parallel if base else ParallelConfig()
    tp, pp = args.tp or bp.tp, args.pp or bp.pp
    cp, ep = args.cp or bp.cp, args.ep or bp.ep
    dp = args.dp or (bp.dp if base else max(1, world_size // (tp * pp * cp)))
    mb = args.micro_batches or bp.micro_batches
    gb = args.global_batch or (bp.global_batch if base else dp * mb)
    mb, gb = _micro_batch_size(getattr(args, "micro_batch_size", None), args, dp, mb, gb)
    par = ParallelConfig(tp=tp, pp=pp, dp=dp, order=args.order or bp.order, micro_batches=mb,
                         global_batch=gb, cp=cp, ep=ep,
                         stage_layers=_stage_layers(args.stage_layers) or bp.stage_layers,
                         sp=bool(args.sp) if args.sp is not None else bp.sp)
    rest = {k: getattr(base, k) for k in ("steps", "seed", "lr", "betas", "eps", "weight_decay",
                                          "dtype", "device", "dp_reduce", "bucket_bytes", "fsdp",
                                          "trace_dir", "peak_flops", "save_dir", "save_every",
                                          "load_dir", "profile_dir", "profile_schedule",
                                          "inject_slow_rank", "slow_factor",
                                          "inject_slow_link", "link_delay_us")} if base else {}
    flags = {"steps": args.steps, "seed": args.seed, "lr": args.lr, "dtype": args.dtype,
             "device": args.device, "dp_reduce": args.dp_reduce, "trace_dir": args.trace_dir,
             "peak_flops": args.peak_flops, "save_dir": args.save_dir,
             "save_every": args.save_every, "load_dir": args.load_dir,
             "bucket_bytes": int(args.bucket_mb * 2**20) if args.bucket_mb else None,
             "fsdp": args.fsdp}
    flags.update(_profile_and_fault_flags(args))
    rest.update({k: v for k, v in flags.items() if v is not None})
    return TrainConfig(model=model, parallel=par, **rest)


def _stage_layers(text: str | None) -> tuple[int, ...] | None:
    """``--stage-layers 3,2`` -> (3, 2)."""
    if not text:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--stage-layers {text!r}: expected layer counts such as 3,2") from None


_MODEL_FLAGS = ("layers", "hidden", "heads", "seq", "vocab", "ffn_hidden", "kv_heads", "experts",
                "top_k", "moe_ffn_hidden", "shared_experts", "first_dense_layers", "ffn")


def _model_from_args(args: argparse.Namespace, m):
    """The preset or config.json of --model (else ``m``) with the model flags applied."""
    import dataclasses

    from trainer.config import is_config_path, load_hf_config

    if args.model:
        m = load_hf_config(args.model) if is_config_path(args.model) else preset(args.model)
    fields = dataclasses.asdict(m)
    over = {k: getattr(args, k) for k in _MODEL_FLAGS if getattr(args, k) is not None}
    if args.hidden and not args.ffn_hidden:
        fields["ffn_hidden"] = 0  # 4 x the new hidden
    if args.heads and not args.kv_heads and m.kv_heads == m.heads:
        fields["kv_heads"] = 0  # stays multi-head attention
    if args.ffn and args.ffn != m.ffn:
        fields["activation"] = ""  # the kind's own activation
    fields.update(over)
    if over and m.name:
        fields["name"] = f"{m.name} (modified: {', '.join(sorted(over))})"
    fields["tied"] = m.tied and not args.untied
    return type(m)(**fields)


def _micro_batch_size(size: int | None, args: argparse.Namespace, dp: int, mb: int,
                      gb: int) -> tuple[int, int]:
    """(micro-batches, global batch) once ``--micro-batch-size`` is applied."""
    if size is None:
        return mb, gb
    if size < 1:
        raise ValueError(f"--micro-batch-size must be >= 1, got {size}")
    if args.micro_batches and args.global_batch:
        if args.global_batch != args.micro_batches * dp * size:
            raise ValueError(f"--global-batch {args.global_batch} != --micro-batches "
                             f"{args.micro_batches} x dp {dp} x --micro-batch-size {size}")
        return mb, gb
    if args.global_batch or (not args.micro_batches and gb != dp * mb):
        if gb % (dp * size):
            raise ValueError(f"global batch {gb} is not a multiple of dp {dp} x "
                             f"--micro-batch-size {size}")
        return gb // (dp * size), gb
    return mb, mb * dp * size


def _profile_and_fault_flags(args: argparse.Namespace) -> dict:
    from trainer.faults import parse_link
    from trainer.profiling import parse_schedule

    return {"profile_dir": args.profile_dir,
            "profile_schedule": parse_schedule(args.profile_schedule)
            if args.profile_schedule else None,
            "inject_slow_rank": args.inject_slow_rank, "slow_factor": args.slow_factor,
            "inject_slow_link": parse_link(args.inject_slow_link)
            if args.inject_slow_link else None,
            "link_delay_us": args.link_delay_us}


def _identity(args: argparse.Namespace) -> tuple[str, int | None, int]:
    """(host, trainer rank from the placement or None, local rank) of this process."""
    host = args.host or os.environ.get("TRAINER_HOST") or socket.gethostname()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if not args.placement:
        return host, None, local_rank
    from trainer.mesh import load_placement, rank_from_placement

    entries = load_placement(args.placement)
    node = int(os.environ.get("GROUP_RANK", os.environ.get("NODE_RANK", 0)))
    entry = rank_from_placement(entries, host, node, local_rank)
    return entry.host, entry.rank, local_rank


def run(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    from trainer.launch import default_backend, init_from_env
    from trainer.mesh import Layout, build_mesh
    from trainer.train import Trainer, resolve_device

    host, placed_rank, local_rank = _identity(args)
    backend = args.backend if args.backend != "auto" else default_backend(args.device or "auto")
    world = int(os.environ.get("WORLD_SIZE", 1))
    cfg = config_from_args(args, world)  # bad input fails here, before joining the world
    cfg.parallel.check_world(world)
    torch.set_num_threads(int(os.environ.get("TRAINER_THREADS", "1")))
    rank, world = init_from_env(backend, placed_rank)
    try:
        device = resolve_device(cfg.device, local_rank)
        par = cfg.parallel
        mesh = build_mesh(Layout(par.tp, par.dp, par.pp, par.order, par.cp, par.ep), rank)
        trainer = Trainer(cfg, mesh, device, host=host, local_rank=local_rank)
        if cfg.load_dir:
            trainer.load(cfg.load_dir)
        summary = _loop(trainer, args, rank)
        if rank == 0 and args.json:
            print(json.dumps(summary), flush=True)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


def _loop(trainer, args, rank: int) -> dict:
    if rank == 0 and not args.json:
        print(f"{'step':>5} {'loss':>10} {'iteration_s':>12} {'tokens/s':>12} {'mfu':>7}", flush=True)
        orig = trainer.train_step

        def step_and_print():
            r = orig()
            mfu = "-" if r["mfu"] is None else f"{r['mfu']:.3f}"
            print(f"{r['step']:>5} {r['loss']:>10.5f} {r['iteration_s']:>12.4f} "
                  f"{r['tokens_per_s']:>12.1f} {mfu:>7}", flush=True)
            return r

        trainer.train_step = step_and_print
    return trainer.run()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except (ValueError, OSError) as exc:
        if os.environ.get("TRAINER_DEBUG"):
            raise
        print(f"trainer: error: {exc}", file=sys.stderr)
        return 2
