"""Issue #31's scenario over seeds: a plain 2-rank DDP job on gloo traced exactly as the
torch.profiler docs show (``schedule(wait=1, warmup=1, active=5)``, ``kineto-rank{R}.json``
per rank; ``tests/netsim/traces/torch_job.py``), clean and with one rank given extra matrix
products, read by ``netsim diagnose``: false alarms and misses of the two-rank test
(``netsim.diagnose.diagnosis.lone_pair_outliers``).

``python -m experiments.diagnose.two_rank --seeds 1-8 --extra 5 40 -o DIR`` writes
``DIR/two_rank.csv``: one row per run (seed, what was injected, who was named, the host's
load average when the run ended) and prints the counts.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from experiments._output import parse_study_args, write_csv

JOB = Path(__file__).resolve().parents[2] / "tests" / "netsim" / "traces" / "torch_job.py"


def run_job(out: Path, seed: int, port: int, slow_rank: int = -1, extra: int = 0) -> None:
    """One 2-rank DDP job's profiler traces into ``out``."""
    cmd = [sys.executable, str(JOB), str(out), "--world", "2", "--seed", str(seed),
           "--port", str(port), "--slow-rank", str(slow_rank), "--extra-matmuls", str(extra)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    if proc.returncode:
        raise RuntimeError(f"torch_job.py seed {seed} failed: {proc.stderr[-2000:]}")


def judge(trace: Path, seed: int, slow_rank: int, extra: int) -> dict:
    """The row of one run: what ``diagnose`` named against what was injected."""
    from netsim.diagnose.diagnosis import diagnose
    from netsim.traces.detect import read_traces

    d = diagnose(read_traces(trace))
    named = [s.rank for s in d.stragglers]
    want = [slow_rank] if slow_rank >= 0 else []
    return {"seed": seed, "injected": f"rank {slow_rank} +{extra} matmuls" if want else "nothing",
            "named": " ".join(map(str, named)) or "nobody",
            "slowdown": round(d.stragglers[0].slowdown, 3) if named else "",
            "confidence": round(d.stragglers[0].confidence, 4) if named else "",
            "right": named == want, "load1": round(os.getloadavg()[0], 1)}


def sweep(seeds: list[int], extras: list[int], port: int = 29900) -> list[dict]:
    """Clean and slowed (rank seed % 2, each of ``extras``) runs of every seed."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for extra in [0, *extras]:
                slow = seed % 2 if extra else -1
                out = Path(tmp) / f"s{seed}-x{extra}"
                port += 1
                run_job(out, seed, port, slow, extra)
                rows.append(judge(out, seed, slow, extra))
                print(rows[-1], flush=True)
    return rows


def _seeds(text: str) -> list[int]:
    a, _, b = text.partition("-")
    return list(range(int(a), int(b or a) + 1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=_seeds, default=_seeds("1-8"), help="A-B (default 1-8)")
    p.add_argument("--extra", type=int, nargs="+", default=[5, 40],
                   help="extra matrix products per step of the slowed rank (default 5 40)")
    p.add_argument("-o", "--out", type=Path, required=True)
    args = parse_study_args(p, argv)
    rows = sweep(args.seeds, args.extra)
    write_csv(args.out / "two_rank.csv", rows)
    clean = [r for r in rows if r["injected"] == "nothing"]
    slowed = [r for r in rows if r["injected"] != "nothing"]
    print(f"false alarms {sum(not r['right'] for r in clean)} of {len(clean)} clean runs; "
          f"misses {sum(not r['right'] for r in slowed)} of {len(slowed)} slowed runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
