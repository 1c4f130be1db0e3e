"""Run several layouts of the same model and data in one gloo world and compare their losses.

``python -m trainer.selfcheck --out DIR`` starts 8 CPU processes once and runs, phase by phase
(layouts of one phase on disjoint ranks, at the same time):

0. tp2 x pp2 x dp2 on all 8 ranks;
1. tp2, pp2 (untied head), dp2 (all-reduce) and dp2 (reduce-scatter, sharded optimizer) on two
   ranks each;
2. the single-process reference, and pp2 x dp2 (reduce-scatter, rank order pp-dp-tp, so
   pipeline neighbours are adjacent ranks) for ``steps`` steps;
3. the same pp2 x dp2 for half the steps, saving a checkpoint; beside it pp4 (two middle
   stages that hold neither embedding copy) on the other four ranks;
4. a fresh trainer resuming that checkpoint up to ``steps``.

``--suite modern`` runs the ``tiny-moe`` model (GQA, SwiGLU, a dense and an MoE block) instead:
tp2 x pp2 x ep2; tp2 x ep2 and cp2 x pp2; the single process, cp2, ep2, ep2 with the
all-to-all forced through its isend/irecv fallback; tp2, ep2 with the sharded optimizer and
dp4 x ep2 (rank order tp-cp-dp-ep-pp); cp2 x ep2 x tp2 (see :func:`modern_cases`).

Every case writes its traces under ``DIR/<case>/``; the JSON printed maps each case to its
summary. One launch instead of one per layout keeps the test suite inside its budget.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

WORLD = 8


@dataclass
class Case:
    name: str
    phase: int
    ranks: list[int]
    tp: int = 1
    pp: int = 1
    dp: int = 1
    untied: bool = False
    order: str = "tp-dp-pp"
    extra: dict = field(default_factory=dict)
    cp: int = 1
    ep: int = 1
    model: str = "tiny"
    fallbacks: tuple[str, ...] = ()
    """Comm ops forced through their fallback (e.g. all_to_all as isend/irecv pairs)."""
    layers: int = 0
    """Layer-count override of the model (0: the preset's)."""
    sp: bool = False
    stage_layers: tuple[int, ...] | None = None
    ref: str = ""
    """The case whose losses this one must reproduce (empty: the suite's single process)."""


def default_cases(steps: int, out: Path) -> list[Case]:
    ckpt = str(out / "checkpoint")
    half = max(1, steps // 2)
    return [
        Case("tp2_pp2_dp2", 0, list(range(8)), tp=2, pp=2, dp=2),
        Case("tp2", 1, [0, 1], tp=2),
        Case("pp2_untied", 1, [2, 3], pp=2, untied=True),
        Case("dp2", 1, [4, 5], dp=2),
        Case("dp2_rs", 1, [6, 7], dp=2, extra={"dp_reduce": "reduce_scatter"}),
        Case("single", 2, [0]),
        Case("single_untied", 2, [1], untied=True),
        Case("resume_full", 2, [4, 5, 6, 7], pp=2, dp=2, order="pp-dp-tp",
             extra={"dp_reduce": "reduce_scatter"}),
        Case("resume_first", 3, [4, 5, 6, 7], pp=2, dp=2, order="pp-dp-tp",
             extra={"dp_reduce": "reduce_scatter", "steps": half, "save_dir": ckpt}),
        Case("pp4", 3, [0, 1, 2, 3], pp=4),
        Case("resume_second", 4, [4, 5, 6, 7], pp=2, dp=2, order="pp-dp-tp",
             extra={"dp_reduce": "reduce_scatter", "load_dir": ckpt}),
    ]


MODERN_LR = 1e-2
"""Learning rate of the modern suite: large enough that a wrong gradient moves the loss far
beyond the float64 parity tolerance within three steps."""


def modern_cases(steps: int, out: Path) -> list[Case]:
    """GQA, SwiGLU, MoE (ep) and ring attention (cp) on the ``tiny-moe`` model, alone and in the
    combinations tp2 x ep2, cp2 x pp2, tp2 x pp2 x ep2 (and cp2 x ep2 x tp2)."""
    m = dict(model="tiny-moe", extra={"lr": MODERN_LR})
    rs = dict(model="tiny-moe", extra={"lr": MODERN_LR, "dp_reduce": "reduce_scatter"})
    return [
        Case("m_tp2_pp2_ep2", 0, list(range(8)), tp=2, pp=2, dp=2, ep=2, **m),
        Case("m_tp2_ep2", 1, [0, 1, 2, 3], tp=2, dp=2, ep=2, **m),
        Case("m_cp2_pp2", 1, [4, 5, 6, 7], cp=2, pp=2, **m),
        Case("m_single", 2, [0], **m),
        Case("m_cp2", 2, [1, 2], cp=2, **m),
        Case("m_ep2", 2, [3, 4], dp=2, ep=2, **m),
        Case("m_ep2_p2p", 2, [5, 6], dp=2, ep=2, fallbacks=("all_to_all",), **m),
        Case("m_tp2", 3, [0, 1], tp=2, **m),
        Case("m_ep2_rs", 3, [2, 3], dp=2, ep=2, **rs),
        Case("m_dp4_ep2", 3, [4, 5, 6, 7], dp=4, ep=2, order="tp-cp-dp-ep-pp", **m),
        Case("m_cp2_ep2_tp2", 4, list(range(8)), tp=2, cp=2, dp=2, ep=2, **m),
    ]


def modern_slow_cases(steps: int, out: Path) -> list[Case]:
    """Larger rings and expert groups (the slow tests): cp4 and ep4 (one expert per rank),
    cp2 x pp2 x dp2 x ep2, tp2 x cp2, against the single process."""
    m = dict(model="tiny-moe", extra={"lr": MODERN_LR})
    return [
        Case("m_cp4", 0, [0, 1, 2, 3], cp=4, **m),
        Case("m_ep4", 0, [4, 5, 6, 7], dp=4, ep=4, **m),
        Case("m_cp2_pp2_dp2_ep2", 1, list(range(8)), cp=2, pp=2, dp=2, ep=2, **m),
        Case("m_single", 2, [0], **m),
        Case("m_tp2_cp2", 2, [4, 5, 6, 7], tp=2, cp=2, **m),
    ]


def layout_cases(steps: int, out: Path) -> list[Case]:
    """Sequence parallelism (tp2, tp2 x pp2) and uneven pipeline stages (5 layers as 3 + 2 and
    1 + 4; 6 layers over pp4 by Megatron-Core's rule, 1 + 2 + 2 + 1), each against the single
    process of the same model."""
    lr = {"extra": {"lr": MODERN_LR}}
    return [
        Case("l_single", 0, [0], **lr),
        Case("l_sp_tp2", 0, [1, 2], tp=2, sp=True, ref="l_single", **lr),
        Case("l_sp_tp2_pp2", 0, [4, 5, 6, 7], tp=2, pp=2, sp=True, ref="l_single", **lr),
        Case("l5_single", 1, [0], layers=5, **lr),
        Case("l5_pp2_3_2", 1, [2, 3], pp=2, layers=5, stage_layers=(3, 2), ref="l5_single", **lr),
        Case("l5_pp2_1_4", 1, [4, 5], pp=2, layers=5, stage_layers=(1, 4), ref="l5_single", **lr),
        Case("l6_single", 2, [0], layers=6, **lr),
        Case("l6_pp4", 2, [4, 5, 6, 7], pp=4, layers=6, ref="l6_single", **lr),
        Case("l_fsdp_dp2", 3, [0, 1], dp=2, ref="l_single", extra={"lr": MODERN_LR, "fsdp": True}),
        Case("l_fsdp_dp2_pp2", 3, [4, 5, 6, 7], dp=2, pp=2, ref="l_single",
             extra={"lr": MODERN_LR, "fsdp": True}),
    ]


SUITES = {"base": default_cases, "modern": modern_cases, "modern_slow": modern_slow_cases,
          "layouts": layout_cases}


def case_config(case: Case, steps: int, dtype: str, out: Path):
    """The TrainConfig of a case: the tiny model, global batch 16 in 4 micro-batches."""
    from trainer.config import ParallelConfig, TrainConfig, preset

    model = preset(case.model, tied=not case.untied, layers=case.layers or None)
    par = ParallelConfig(tp=case.tp, pp=case.pp, dp=case.dp, order=case.order, micro_batches=4,
                         global_batch=16, cp=case.cp, ep=case.ep, sp=case.sp,
                         stage_layers=case.stage_layers)
    kw = dict(steps=steps, dtype=dtype, device="cpu", trace_dir=str(out / case.name),
              bucket_bytes=16 * 1024)  # small buckets: several per stage, as in a real model
    kw.update(case.extra)
    return TrainConfig(model=model, parallel=par, **kw)


def _worker(rank: int, world: int, steps: int, dtype: str, out: str, suite: str = "base") -> None:
    import torch
    import torch.distributed as dist

    from trainer.mesh import Layout, build_mesh
    from trainer.train import Trainer

    out_p = Path(out)
    cases = SUITES[suite](steps, out_p)
    meshes = {c.name: build_mesh(Layout(c.tp, c.dp, c.pp, c.order, c.cp, c.ep), rank, c.ranks)
              for c in cases}
    for phase in sorted({c.phase for c in cases}):
        for c in cases:
            if c.phase == phase and meshes[c.name] is not None:
                cfg = case_config(c, steps, dtype, out_p)
                t = Trainer(cfg, meshes[c.name], torch.device("cpu"), host="localhost",
                            local_rank=rank)
                t.comm.fallbacks.update(c.fallbacks)
                if cfg.load_dir:
                    t.load(cfg.load_dir)
                t.run()
        dist.barrier()


def run_selfcheck(out: str | Path, steps: int = 3, dtype: str = "float64",
                  suite: str = "base") -> dict[str, dict]:
    """Launch the 8-process check of ``suite`` (base: the tiny GPT's layouts; modern: GQA,
    SwiGLU, MoE/ep, cp); returns {case: summary}."""
    from trainer.launch import spawn

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    spawn(_worker, WORLD, args=(steps, dtype, str(out), suite))
    return {c.name: json.loads((out / c.name / "summary.json").read_text())
            for c in SUITES[suite](steps, out)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.selfcheck", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="directory for the traces of every case")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    p.add_argument("--suite", default="base", choices=tuple(SUITES))
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    res = run_selfcheck(args.out, args.steps, args.dtype, args.suite)
    if args.json:
        print(json.dumps(res))
        return 0
    first = SUITES[args.suite](args.steps, Path(args.out))[0].name
    ref = ({"single": res["single"]["losses"], "single_untied": res["single_untied"]["losses"]}
           if args.suite == "base" else {"single": res[first]["losses"]})
    refs = {c.name: c.ref for c in SUITES[args.suite](args.steps, Path(args.out)) if c.ref}
    ref["single_untied"] = ref.get("single_untied", ref["single"])
    for name, s in res.items():
        base = ref["single_untied" if "untied" in name else "single"]
        if name in refs:
            base = res[refs[name]]["losses"]
        if name.startswith("resume_second"):
            base = res["resume_full"]["losses"][s["start_step"]:]
        diff = max(abs(a - b) / abs(b) for a, b in zip(s["losses"], base, strict=False))
        print(f"{name:15s} tp={s['tp']} cp={s.get('cp', 1)} ep={s.get('ep', 1)} pp={s['pp']} "
              f"dp={s['dp']}  max rel diff {diff:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
