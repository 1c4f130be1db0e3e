"""The training loop of one rank: builds the stage, the reducer and the schedule, runs steps.

Parallelism is applied in a fixed order (torchtitan's ``parallelize``): tensor parallelism by
the layers' sharded construction, then the pipeline split (this rank builds only its stage),
then data parallelism (buckets and hooks over the stage's parameters).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from trainer import checkpoint
from trainer.comm import Comm
from trainer.config import TrainConfig, stage_split
from trainer.data import rank_batch
from trainer.data_parallel import AdamW
from trainer.faults import FaultInjector
from trainer.flops import default_peak_flops, mfu, parameter_count, training_flops
from trainer.hostinfo import HostWindow
from trainer.layers import TPContext
from trainer.mesh import Mesh
from trainer.model import GPTStage
from trainer.moe import make_reducers
from trainer.pipeline import OneFOneB
from trainer.trace import SCHEMA, Clock, Tracer, end_record, new_run_id

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16}


def resolve_device(name: str, local_rank: int) -> torch.device:
    """cpu, or this process's GPU (``local_rank``) for cuda / auto-with-CUDA."""
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError("device=cuda but torch.cuda.is_available() is False: use --device cpu")
    torch.cuda.set_device(local_rank % torch.cuda.device_count())
    return torch.device("cuda", torch.cuda.current_device())


def cp_chunk(t: torch.Tensor, cp: int, index: int) -> torch.Tensor:
    """This context-parallel rank's contiguous chunk of the sequence axis (the last)."""
    if cp == 1:
        return t
    n = t.shape[-1] // cp
    return t[..., index * n:(index + 1) * n].contiguous()


def modern_meta(m, par, coords: dict[str, int]) -> dict[str, Any]:
    """The ``meta`` keys of context and expert parallelism."""
    return {"cp": par.cp, "ep": par.ep, "cp_rank": coords["cp"], "ep_rank": coords["ep"],
            "sequence_parallel": par.sp and par.tp > 1}


def modern_model(m) -> dict[str, Any]:
    """The ``meta.model`` keys of GQA, gated FFN and MoE."""
    return {"name": m.name, "kv_heads": m.kv_heads, "ffn": m.ffn, "activation": m.activation,
            "experts": m.experts, "top_k": m.top_k, "moe_ffn_hidden": m.moe_ffn_hidden,
            "shared_experts": m.shared_experts, "first_dense_layers": m.first_dense_layers,
            "moe_every": m.moe_every, "moe_layers": m.moe_layers}


class Trainer:
    """One rank of a run on ``mesh``."""

    def __init__(self, cfg: TrainConfig, mesh: Mesh, device: torch.device, host: str | None = None,
                 local_rank: int = 0) -> None:
        self.cfg, self.mesh, self.device = cfg, mesh, device
        self.host = host or socket.gethostname()
        self.local_rank = local_rank
        par, model = cfg.parallel, cfg.model
        par.check_world(mesh.layout.world_size)
        self.dtype = DTYPES[cfg.dtype]
        cuda = device.type == "cuda"
        trace_path = None
        if cfg.trace_dir is not None:
            Path(cfg.trace_dir).mkdir(parents=True, exist_ok=True)
            trace_path = Path(cfg.trace_dir) / f"trace-rank{mesh.rank}.jsonl"
        faults = cfg.fault_config()
        self.tracer = Tracer(Clock(cuda), trace_path, enabled=cfg.trace_dir is not None
                             or cfg.profile_dir is not None or faults.active)
        self.comm = Comm(self.tracer, mesh.world_ranks, mesh.rank, cuda)
        self.faults = FaultInjector(faults, mesh.rank, self.tracer)
        self.faults.install(self.comm)
        ctx = TPContext(mesh.tp, mesh.rank, self.comm, cfg.seed, self.dtype, device, cp=mesh.cp,
                        ep=mesh.ep)
        ctx.sp = par.sp and par.tp > 1
        split = stage_split(model.layers, par.pp, par.stage_layers)
        self.stage = GPTStage(model, ctx, mesh.coords["pp"], par.pp, self.tracer,
                              par.micro_batch_size, split)
        opt = AdamW(lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
        # dense parameters over dp x cp, expert parameters over edp x cp (trainer/moe.py)
        self.dp = make_reducers(self.stage, mesh, self.comm, cfg.dp_reduce, cfg.bucket_bytes, opt,
                                self.stage.tied_copy(), fsdp=cfg.fsdp)
        sp = par.tp if ctx.sp else 1  # sequence parallelism: 1/tp of the sequence between stages
        shape = (par.micro_batch_size, model.seq // par.cp // sp, model.hidden)
        self.schedule = OneFOneB(self.stage, mesh, self.comm, self.tracer, self.dp, shape,
                                 self.dtype, device)
        self.step = 0
        self.peak_flops = cfg.peak_flops
        if self.peak_flops is None and cuda:
            self.peak_flops = default_peak_flops(torch.cuda.get_device_name(device), cfg.dtype)
        self.iterations: list[dict[str, Any]] = []
        self.run_id = self._agree_run_id()
        self.tracer.write_now(self.meta())

    # -- description ---------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        """The ``meta`` record (first line of every trace)."""
        c, m, par = self.mesh.coords, self.cfg.model, self.cfg.parallel
        return {"type": "meta", "schema": SCHEMA, "run_id": self.run_id, "rank": self.mesh.rank,
                "world_size": self.mesh.layout.world_size, "tp": par.tp, "pp": par.pp, "dp": par.dp,
                "order": par.order, "backend": dist.get_backend() if dist.is_initialized() else None,
                "device": str(self.device), "dtype": self.cfg.dtype,
                "model": {"layers": m.layers, "hidden": m.hidden, "heads": m.heads,
                          "ffn_hidden": m.ffn_hidden, "seq": m.seq, "vocab": m.vocab, "tied": m.tied,
                          **modern_model(m)},
                "micro_batches": par.micro_batches, "micro_batch_size": par.micro_batch_size,
                "global_batch": par.global_batch, "tp_rank": c["tp"], "pp_rank": c["pp"],
                "dp_rank": c["dp"], "host": self.host, "host_cores": os.cpu_count(),
                "local_rank": self.local_rank,
                "world_rank": self.mesh.to_world(self.mesh.rank), "dp_reduce": self.cfg.dp_reduce,
                "bucket_bytes": self.cfg.bucket_bytes, "seed": self.cfg.seed, "fsdp": self.cfg.fsdp,
                "parameters": parameter_count(m), "peak_flops": self.peak_flops,
                "stage_layers": self.stage.layer_ids, **modern_meta(m, par, c),
                **self._fault_meta()}

    def _fault_meta(self) -> dict[str, Any]:
        """The injected faults (ground truth for ``netsim diagnose``), when any."""
        f = self.cfg.fault_config()
        if not f.active:
            return {}
        return {"faults": {"slow_rank": f.slow_rank, "slow_factor": dict(f.slow_ranks).get(f.slow_rank, f.slow_factor),
                           "slow_ranks": [list(x) for x in f.slow_ranks],
                           "slow_link": list(f.slow_link) if f.slow_link else None,
                           "link_delay_us": f.link_delay_us}}

    def _agree_run_id(self) -> str:
        """Layout rank 0's fresh run id, known on every rank (one object broadcast)."""
        box = [new_run_id()]
        if self.mesh.world.size > 1:
            dist.broadcast_object_list(box, src=self.mesh.to_world(0), group=self.mesh.world.pg)
        return box[0]

    # -- one iteration -------------------------------------------------------------------------
    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def train_step(self) -> dict[str, Any]:
        """Run iteration ``self.step``; returns its ``iteration`` record."""
        cfg, par, m = self.cfg, self.cfg.parallel, self.cfg.model
        self.tracer.step = self.step
        ids, targets = rank_batch(cfg.seed, self.step, par.global_batch, m.seq, m.vocab, par.dp,
                                  self.mesh.coords["dp"], par.micro_batches)
        ids, targets = cp_chunk(ids, par.cp, self.mesh.coords["cp"]), cp_chunk(
            targets, par.cp, self.mesh.coords["cp"])
        ids, targets = ids.to(self.device), targets.to(self.device)
        self._sync()
        t0 = time.perf_counter()
        start = self.tracer.stamp(open_range=("iteration", "iteration", None))
        loss = self.schedule.run(ids, targets)
        opt_start = self.tracer.stamp(open_range=("optimizer", "optimizer", None))
        self.dp.step()
        self.tracer.compute("optimizer", None, opt_start, self.tracer.stamp(), None, "optimizer",
                            microbatch=None)
        loss_value = self._global_loss(loss)
        self._sync()
        iteration_s = time.perf_counter() - t0
        self.tracer.compute("iteration", None, start, self.tracer.stamp(), None, "iteration",
                            microbatch=None)
        flops = training_flops(m, par.global_batch)
        tokens = par.global_batch * m.seq
        rec = {"type": "iteration", "step": self.step, "iteration_s": iteration_s,
               "loss": loss_value, "tokens": tokens, "tokens_per_s": tokens / iteration_s,
               "model_flops": flops, "achieved_flops_per_s": flops / iteration_s,
               "mfu": mfu(flops, iteration_s, self.mesh.layout.world_size, self.peak_flops)}
        self.tracer.add(rec)
        self.tracer.flush()
        self.iterations.append(rec)
        self.step += 1
        return rec

    def _global_loss(self, loss: torch.Tensor | None) -> float:
        """Mean loss over data- (and context-) parallel ranks, known on every rank (one small
        'other' all-reduce)."""
        value = torch.zeros(1, dtype=torch.float64, device=self.device)
        if loss is not None and self.mesh.coords["tp"] == 0:
            value += loss.detach().to(torch.float64) / (self.mesh.layout.dp * self.mesh.layout.cp)
        if self.mesh.world.size > 1:
            self.comm.all_reduce(value, self.mesh.world, "other")
        return float(value.item())

    # -- run, checkpoint -----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Train until ``cfg.steps``; checkpoint as configured; returns the summary."""
        cfg = self.cfg
        start_step = self.step
        prof, window = self._profiler(), HostWindow()
        while self.step < cfg.steps:
            self.train_step()
            if self.step == start_step + 1:
                window.start()  # the host record leaves out the warm-up step
            if prof is not None:
                prof.step(window.record() if self.step > start_step + 1 else None)
            if cfg.save_dir and cfg.save_every and self.step % cfg.save_every == 0:
                self.save(cfg.save_dir)
        if cfg.save_dir and (not cfg.save_every or self.step % cfg.save_every):
            self.save(cfg.save_dir)
        if prof is not None:
            prof.stop()
            self.tracer.ranges = None
        self.tracer.write_now(window.record())
        self.tracer.write_now(end_record(self.run_id, len(self.iterations)))
        summary = self.summary(start_step)
        if cfg.trace_dir is not None and self.mesh.rank == 0:
            Path(cfg.trace_dir, "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        self.tracer.close()
        return summary

    def _profiler(self):
        """The scheduled torch.profiler session of ``--profile``, started; or None."""
        if self.cfg.profile_dir is None:
            return None
        from trainer.profiling import Profiler, Ranges

        prof = Profiler(self.cfg.profile_dir, self.mesh.rank, self.meta(),
                        self.device.type == "cuda", self.cfg.profile_schedule, self.step)
        self.tracer.ranges = Ranges()
        prof.start()
        return prof

    def summary(self, start_step: int = 0) -> dict[str, Any]:
        meta = {k: v for k, v in self.meta().items() if k != "type"}
        its = self.iterations
        return {**meta, "losses": [r["loss"] for r in its],
                "iteration_s": [r["iteration_s"] for r in its],
                "tokens_per_s": [r["tokens_per_s"] for r in its],
                "mfu": [r["mfu"] for r in its],
                "model_flops_per_iteration": training_flops(self.cfg.model, self.cfg.parallel.global_batch),
                "start_step": start_step, "steps": self.step,
                "fallbacks": sorted(self.comm.fallbacks)}

    def _layout(self) -> dict[str, Any]:
        p = self.cfg.parallel
        return {"tp": p.tp, "pp": p.pp, "dp": p.dp, "order": p.order,
                "micro_batches": p.micro_batches, "global_batch": p.global_batch,
                **({"cp": p.cp, "ep": p.ep} if p.cp * p.ep > 1 else {})}

    def save(self, root: str) -> None:
        state = {"dp": self.dp.state_dict(), "layout": self._layout(), "config": self.cfg.to_dict()}
        checkpoint.save(root, self.mesh.rank, self.step, state)
        self._barrier()
        if self.mesh.rank == 0:
            checkpoint.mark_latest(root, self.step)
        self._barrier()

    def load(self, root: str) -> None:
        state = checkpoint.load(root, self.mesh.rank, self._layout())
        self.dp.load_state_dict(state["dp"])
        self.step = int(state["step"])

    def _barrier(self) -> None:
        if self.mesh.world.size > 1:
            dist.barrier(group=self.mesh.world.pg)
