"""Does ``netsim diagnose`` name injected stragglers and slow links, alone, and nobody in clean
runs? The CPU trainer (8 gloo ranks on this host) runs each layout clean, with one slow rank
(``--inject-slow-rank``) and with one slow link (``--inject-slow-link``), for several seeds;
every run's traces are diagnosed and compared with what was injected.

    python -m experiments.diagnose.run [--full | --tiny] [-o DIR] [--background N] [--json] [--workers N]

Default: 5 layouts (``LAYOUTS``) x 1 seed x (clean, straggler x1.5, link 5 ms where the
layout has one), 10 steps (about 10 minutes on 2 busy cores). ``--full``: 3 seeds (``--seeds``
to choose) and the straggler at x1.2, the smallest slowdown the issue asks to find (plus x1.5
on the layout whose stages have two ranks). ``--tiny`` (CI's size): dp8 alone, clean and
x1.5, two runs. Writes ``DIR/results.csv``. The
seed moves the weights, the data and which rank or link is faulty. ``--background N`` runs N
co-tenant processes beside every run: a shared host, reproducibly.

Every run is a point of :func:`sweeps.run_points` (``DIR/sweep/results.jsonl``): an
interrupted sweep resumes where it stopped. The runs go one at a time in this process by
default (``--workers 0``): each is timed with all 8 ranks on the host, and two at once would
be two co-tenants of each other; ``--workers N`` or ``--scheduler`` spread them over Dask
workers, each of which should then be a host of its own.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from experiments._sweeps import ok_outputs, study_parser
from netsim.diagnose.diagnosis import diagnose
from netsim.traces.records import read_trace_dir

LAYOUTS = ((1, 1, 8), (2, 1, 4), (1, 2, 4), (2, 2, 2), (2, 4, 1))
"""(tp, pp, dp): dp8 (one stage of 8; its only collectives are the overlapped gradient
buckets and the world's loss all-reduce: no link to compare, so no link injected), tp2-dp4 and
tp2-pp2-dp2 (a slow tensor-parallel pair), pp2-dp4 (a slow pipeline send, forward or backward
by seed) and tp2-pp4 (stages of two ranks: each stage's pair compared with itself)."""
STEPS = 10
MODEL_ARGS = ("--model", "tiny", "--hidden", "128", "--seq", "64")
"""Large enough that a rank's CPU time per step (tens of ms) is steady to ~10% on a shared host."""


@dataclass(frozen=True)
class Scenario:
    tp: int
    pp: int
    dp: int
    seed: int
    fault: str
    """clean, straggler or link."""
    factor: float = 1.0
    delay_us: float = 0.0

    @property
    def name(self) -> str:
        extra = {"clean": "", "straggler": f"-x{self.factor:g}",
                 "link": f"-{self.delay_us:g}us"}[self.fault]
        return f"tp{self.tp}-pp{self.pp}-dp{self.dp}-s{self.seed}-{self.fault}{extra}"

    def slow_rank(self) -> int:
        return (3 * self.seed + 1) % 8

    @property
    def has_link(self) -> bool:
        """Layouts with several groups of one family: tp pairs or pipeline sends."""
        return self.tp > 1 or self.pp > 1

    def slow_link(self) -> tuple[int, int]:
        """A pair that shares a synchronous group: a tp pair, else a pipeline send (stage 0
        rank r to stage 1 rank r + 4 for odd seeds, the backward send for even ones)."""
        if self.tp > 1:
            base = 2 * ((self.seed + 1) % 4)
            return base, base + 1
        r = self.seed % 4
        return (r, r + 4) if self.seed % 2 else (r + 4, r)

    def expected(self) -> tuple[list[int], list[list[int]]]:
        if self.fault == "straggler":
            return [self.slow_rank()], []
        if self.fault == "link":
            r, peer = self.slow_link()
            return [], [sorted((r, peer)) if self.tp > 1 else [r, peer]]
        return [], []

    def trainer_args(self) -> list[str]:
        args = ["--tp", str(self.tp), "--pp", str(self.pp), "--dp", str(self.dp),
                "--micro-batches", "4", "--global-batch", str(4 * self.dp),
                "--seed", str(self.seed), "--steps", str(STEPS)]
        if self.fault == "straggler":
            args += ["--inject-slow-rank", str(self.slow_rank()), "--slow-factor",
                     str(self.factor)]
        if self.fault == "link":
            r, peer = self.slow_link()
            args += ["--inject-slow-link", f"{r}:{peer}", "--link-delay-us", str(self.delay_us)]
        return args


def scenarios(full: bool, seeds: tuple[int, ...] | None = None,
              layouts: tuple[tuple[int, int, int], ...] = LAYOUTS) -> list[Scenario]:
    seeds = seeds or ((1, 2, 3) if full else (1,))
    out = []
    for tp, pp, dp in layouts:
        for seed in seeds:
            out.append(Scenario(tp, pp, dp, seed, "clean"))
            out.append(Scenario(tp, pp, dp, seed, "straggler", factor=1.2 if full else 1.5))
            if full and tp * dp < 3:  # stages of two ranks: also the x1.5 of the first sweeps
                out.append(Scenario(tp, pp, dp, seed, "straggler", factor=1.5))
            if Scenario(tp, pp, dp, seed, "clean").has_link:
                out.append(Scenario(tp, pp, dp, seed, "link", delay_us=5000))
    return out


BACKGROUND_JOB = ("import numpy as np\n"
                  "a = np.random.default_rng(0).random(1 << 20)\n"
                  "while True:\n"
                  "    a = np.sort(a)[::-1].copy()\n")
"""One co-tenant of ``--background``: sorts an 8 MB array over and over (CPU, cache and
memory traffic, as another job's simulation on the same host would)."""


def run_trainer(sc: Scenario, d: Path, timeout_s: float = 900, background: int = 0) -> Path:
    """One 8-rank CPU trainer run (torchrun) with its traces in ``d``, beside ``background``
    co-tenant processes (``BACKGROUND_JOB``) started before it and stopped after it."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "8", "-m", "trainer", *MODEL_ARGS, "--backend", "gloo", "--device", "cpu",
           "--trace-dir", str(d), *sc.trainer_args()]
    env = dict(os.environ, OMP_NUM_THREADS="1", TRAINER_THREADS="1")
    others = [subprocess.Popen([sys.executable, "-c", BACKGROUND_JOB], env=env)
              for _ in range(background)]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    finally:
        for p in others:
            p.kill()
            p.wait()
    if proc.returncode:
        raise RuntimeError(f"trainer {sc.name} failed:\n{proc.stderr[-2000:]}")
    return d


def judge(sc: Scenario, d: Path) -> dict:
    """Diagnose one run and compare with what was injected."""
    run = read_trace_dir(d)
    diag = diagnose(run)
    want_s, want_l = sc.expected()
    loads = [r.host_record.get("loadavg_1m") for r in run.ranks if r.host_record]
    other = [h["other_cores"] for h in diag.host_sharing]
    got_s = [s.rank for s in diag.stragglers]
    got_l = [sorted(sl.ranks) if sc.tp > 1 else sl.ranks for sl in diag.slow_links]
    return {"scenario": sc.name, "layout": f"tp{sc.tp}-pp{sc.pp}-dp{sc.dp}", "seed": sc.seed,
            "fault": sc.fault, "factor": sc.factor, "delay_us": sc.delay_us,
            "injected_stragglers": want_s, "named_stragglers": got_s,
            "slowdowns": [round(s.slowdown, 3) for s in diag.stragglers],
            "injected_links": want_l, "named_links": got_l,
            "link_slowdowns": [round(sl.slowdown, 3) for sl in diag.slow_links],
            "correct": got_s == want_s and got_l == want_l,
            "load_1m": round(max(x for x in loads if x is not None), 1)
            if any(x is not None for x in loads) else None,
            "other_cores": round(max(other), 2) if other else None}


def markdown(rows: list[dict]) -> str:
    """The result table of ``docs/diagnose.md``."""
    def what(r: dict, named: bool) -> str:
        s = r["named_stragglers" if named else "injected_stragglers"]
        links = r["named_links" if named else "injected_links"]
        out = [f"rank {x}" + (f" x{f:g}" if named else f" x{r['factor']:g}")
               for x, f in zip(s, r["slowdowns"] if named else [r["factor"]] * len(s),
                               strict=True)]
        out += [f"link {lk}" + (f" x{f:g}" if named else f" +{r['delay_us'] / 1e3:g} ms")
                for lk, f in zip(links, r["link_slowdowns"] if named else [0] * len(links),
                                 strict=True)]
        return ", ".join(out) or ("nobody" if named else "nothing")

    lines = ["| layout | seed | other cores | injected | named | exactly right |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        other = r.get("other_cores")
        lines.append(f"| {r['layout']} | {r['seed']} | {'?' if other is None else other} | "
                     f"{what(r, False)} | {what(r, True)} | "
                     f"{'yes' if r['correct'] in (True, 'True') else 'no'} |")
    return "\n".join(lines)


def outcome_class(r: dict) -> str:
    """The row's class in the summary: clean, link, or a straggler by factor and stage size."""
    if r["fault"] != "straggler":
        return "clean: nobody named" if r["fault"] == "clean" else "5 ms link named alone"
    tp, pp, dp = (int(x[2:]) for x in r["layout"].split("-"))
    size = "stages of two ranks" if tp * dp == 2 else "stages of 4 or 8 ranks"
    return f"x{float(r['factor']):g} straggler, {size}, named alone"


def summary(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """{class: (right, runs)} over ``rows`` (``outcome_class``)."""
    out: dict[str, list[int]] = {}
    for r in rows:
        c = out.setdefault(outcome_class(r), [0, 0])
        c[0] += r["correct"] in (True, "True")
        c[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def scenario_point(point: dict, out: str, reuse: bool) -> dict:
    """One sweep point: the trainer run of ``point`` (a :class:`Scenario`'s fields and
    ``background``) into ``out/NAME`` (kept with ``reuse``), judged."""
    point = dict(point)
    background = int(point.pop("background", 0))
    sc = Scenario(**point)
    d = Path(out) / sc.name
    if not (reuse and (d / "summary.json").exists()):
        t0 = time.perf_counter()
        run_trainer(sc, d, background=background)
        print(f"ran {sc.name} in {time.perf_counter() - t0:.0f} s, load "
              f"{os.getloadavg()[0]:.1f}", file=sys.stderr)
    return judge(sc, d)


def run_sweep(out: Path, scs: list[Scenario], background: int = 0, reuse: bool = False,
              workers: int | None = 0, scheduler: str | None = None) -> list[dict]:
    """Every scenario as a point of :func:`sweeps.run_points` (resumed from
    ``out/sweep/results.jsonl``); the rows of the runs that finished."""
    from sweeps import run_points

    points = [dataclasses.asdict(sc) | {"background": background} for sc in scs]
    results = run_points(functools.partial(scenario_point, out=str(out), reuse=reuse), points,
                         out_dir=out / "sweep", workers=workers, scheduler=scheduler,
                         progress=False)
    return ok_outputs(results, "diagnose")


def main(argv: list[str] | None = None) -> int:
    ap = study_parser(__doc__, "3 seeds, the straggler at x1.2", out_default=Path("/tmp/diagnose-sweep"))
    ap.set_defaults(workers=0)
    ap.add_argument("--reuse", action="store_true", help="reuse traces already in --out")
    ap.add_argument("--tiny", action="store_true",
                    help="CI's size: the dp8 layout alone (clean and a x1.5 straggler)")
    ap.add_argument("--seeds", help="comma list of seeds (default 1; 1,2,3 with --full)")
    ap.add_argument("--background", type=int, default=0, metavar="N",
                    help="run N co-tenant processes on the host beside each run (a shared "
                         "host, reproducibly; default 0)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="print the result table")
    args = ap.parse_args(argv)
    if args.background < 0:
        ap.error(f"--background must be 0 or more processes, got {args.background}")
    out = Path(args.out)
    seeds = tuple(int(x) for x in args.seeds.split(",")) if args.seeds else None
    if args.tiny and args.full:
        ap.error("--tiny and --full exclude each other")
    layouts = LAYOUTS[:1] if args.tiny else LAYOUTS
    rows = run_sweep(out, scenarios(args.full, seeds, layouts), args.background, args.reuse,
                     args.workers, args.scheduler)
    if not rows:
        print("diagnose: no run finished", file=sys.stderr)
        return 1
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    from experiments.diagnose.figure import figure

    figure(out / "results.csv", out / "diagnosis.png")
    ok = sum(r["correct"] for r in rows)
    if args.markdown:
        print(markdown(rows))
        print("\n".join(f"- {k}: {a} of {n}" for k, (a, n) in summary(rows).items()))
    if args.json:
        print(json.dumps({"rows": rows, "correct": ok, "runs": len(rows)}, indent=2))
    else:
        print(f"{ok} of {len(rows)} runs diagnosed exactly as injected; {out / 'results.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
