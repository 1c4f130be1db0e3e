"""Scale study: ``python -m experiments.scale_mfu.run [--full] -o DIR``.

Sweeps ``overlaps.yaml`` and ``network.yaml`` (``*_full.yaml`` with ``--full``: eight scales;
``*_tiny.yaml`` with ``--tiny``: CI's size) through ``sweeps``, resumable into
``DIR/overlaps`` and ``DIR/network``; writes ``DIR/mfu_*.csv``,
``DIR/megascale_tables[_flow].csv``, ``DIR/megascale_table3_steps.csv`` and the figures;
``python -m experiments.results --render --study scale_mfu`` puts their numbers in README.md.
"""

from __future__ import annotations

from pathlib import Path

from experiments._output import finish_figure, parse_study_args, write_csv
from experiments._sweeps import ok_rows, run_spec_files, study_parser

HERE = Path(__file__).resolve().parent
SPECS = ("overlaps", "network")
#: MegaScale (NSDI'24) abstract: 55.2% MFU for 175B on 12,288 GPUs, 1.34x Megatron-LM
MEGASCALE_12288_MFU = 0.552
MEGATRON_RATIO = 1.34


def run_specs(out: Path, full: bool, workers: int | None, scheduler: str | None,
              progress: bool = True, size: str | None = None) -> dict[str, list[dict]]:
    """Run (or resume) both sweeps (``size="tiny"``: ``*_tiny.yaml``, CI's size); rows of
    point + output of the points that succeeded."""
    res = run_spec_files(HERE, SPECS, out, full, workers, scheduler, progress, size=size)
    return {name: _ok(r) for name, r in res.items()}


def _ok(results) -> list[dict]:
    return sorted(ok_rows(results, "scale_mfu"),
                  key=lambda r: (r["gpus"], r["overlap"], r["network"]))


def _series(rows, **match):
    rs = sorted((r for r in rows if all(r[k] == v for k, v in match.items())),
                key=lambda r: r["gpus"])
    return [r["gpus"] for r in rs], [100 * r["mfu"] for r in rs]


def _published(ax) -> None:
    ax.plot([12288], [100 * MEGASCALE_12288_MFU], "k*", ms=12,
            label="MegaScale, published (all optimizations)")
    ax.plot([12288], [100 * MEGASCALE_12288_MFU / MEGATRON_RATIO], "kP", ms=9,
            label="Megatron-LM, published (MegaScale / 1.34)")


def plot_overlaps(rows: list[dict], path: Path | None = None):
    """Predicted MFU vs GPUs for Megatron-LM defaults, each overlap alone, and all."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for ov in ("none", "dp_grad_reduce", "dp_param_gather", "pp_send_recv", "tp_comm", "all"):
        x, y = _series(rows, overlap=ov, network="base")
        if x:
            ax.plot(x, y, "-o", label={"none": "Megatron-LM defaults",
                                       "all": "every overlap"}.get(ov, f"{ov} only"))
    _published(ax)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs (GPT-3 175B, TP 8, PP 8, batch 6144)")
    ax.set_ylabel("predicted MFU (%)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return finish_figure(fig, path)


def plot_network(rows: list[dict], path: Path | None = None):
    """Predicted MFU vs GPUs under the network what-ifs, without and with overlap."""
    import matplotlib.pyplot as plt

    whatif = {r["gpus"] for r in rows if r["network"] != "base"}
    rows = [r for r in rows if r["gpus"] in whatif]  # the scales every what-if ran at
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, ov in zip(axes, ("none", "all"), strict=True):
        for net in ("base", "nic_x0.5", "nic_x2", "agg_2to1", "spine_down"):
            x, y = _series(rows, overlap=ov, network=net)
            if x:
                ax.plot(x, y, "-o", ms=4, label=net)
        _published(ax)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs")
        ax.set_title("Megatron-LM defaults" if ov == "none" else "every overlap")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("predicted MFU (%)")
    axes[1].legend(fontsize=7)
    return finish_figure(fig, path)


def write_sweeps(rows: dict[str, list[dict]], out: Path) -> None:
    """The overlap and network CSVs and figures (the network what-ifs with their base rows)."""
    rows["network"] = sorted(rows["network"] + [r for r in rows["overlaps"]
                                                if r["overlap"] in ("none", "all")],
                             key=lambda r: (r["gpus"], r["overlap"], r["network"]))
    write_csv(out / "mfu_overlaps.csv", rows["overlaps"])
    write_csv(out / "mfu_network.csv", rows["network"])
    plot_overlaps(rows["overlaps"], out / "mfu_overlaps.png")
    plot_network(rows["network"], out / "mfu_network.png")


def write_tables(out: Path, tiny: bool) -> None:
    """The ablation, MegaScale's Tables 2 and 3 (analytic and with the flow engine; ``tiny``:
    the flow engine on the rows up to 1,024 GPUs only) and Table 3 step by step."""
    from experiments.scale_mfu.ablation import ablation_rows, plot_ablation
    from experiments.scale_mfu.megascale_tables import compare, load_published
    from experiments.scale_mfu.megascale_tables import plot as plot_tables
    from experiments.scale_mfu.table3_steps import step_rows

    ablation = ablation_rows()
    write_csv(out / "mfu_ablation.csv", ablation)
    plot_ablation(ablation, out / "mfu_ablation.png")
    tables = compare()
    write_csv(out / "megascale_tables.csv", tables)
    plot_tables(tables, out / "megascale_tables.png")
    published = [r for r in load_published() if not tiny or r.gpus <= 1024]
    flow = compare(published, flow=True)
    write_csv(out / "megascale_tables_flow.csv", flow)
    plot_tables(flow, out / "megascale_tables_flow.png")
    write_csv(out / "megascale_table3_steps.csv", step_rows())


def main(argv: list[str] | None = None) -> int:
    p = study_parser(__doc__, "eight scales from 256 to 12,288 GPUs")
    p.add_argument("--tiny", action="store_true",
                   help="CI's size: 256 and 1,536 GPUs, no overlap and all; the flow-engine "
                        "tables up to 1,024 GPUs")
    args = parse_study_args(p, argv)
    rows = run_specs(args.out, args.full, args.workers, args.scheduler,
                     size="tiny" if args.tiny else None)
    write_sweeps(rows, args.out)
    write_tables(args.out, args.tiny)
    from tuner.cli._output import format_table

    for name in SPECS:
        print(format_table(["gpus", "overlap", "network", "mfu_%", "iteration_s",
                            "exposed_comm_s"],
                           [[r["gpus"], r["overlap"], r["network"], 100 * r["mfu"],
                             r["iteration_s"], r["exposed_comm_s"]] for r in rows[name]]))
        print()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
