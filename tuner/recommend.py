"""``netsim recommend``: placement and every NCCL / NIC / switch setting, with reasons and the
simulators' predicted effects, for one job on one fabric.

Steps (each one a library call of ``tuner``):

1. placement: :func:`tuner.placement.compare_strategies` (topo vs the scheduler's order);
2. ECMP entropy: :func:`tuner.search.search_qps` on the chosen placement (``predict``'s
   iteration time per QP count, flow engine);
3. collectives: :func:`tuner.search.search_collectives` on one DP group (collective model);
4. congestion control: :func:`tuner.ccsearch.search_job_cc` on the job's own congestion points (packet engine);
5. retransmit: :func:`tuner.retransmit.recommend_retransmit` from the flap model;
6. QoS / PFC headroom from the fabric's port speeds and cable lengths (or the probe);
7. the predicted iteration time with defaults (scheduler order, 1 QP) vs with the placement
   and QP recommendation (``netsim.workload.predict`` on the flow engine: the scores steps 1
   and 2 chose by).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tuner.qos import CNP_DSCP, CNP_PRIO, NCCL_IB_TC, ROCE_DSCP, ROCE_PRIO  # noqa: F401
from tuner.render import Setting, TunerRow

DEFAULT_FLAPS = "max=5s"   # MegaScale 6.3: flaps last "several seconds"


@dataclass
class RecommendOptions:
    """Knobs of a recommendation run."""

    budget: int = 16               # packet-engine evaluations of the CC search
    cc_samples: int = 5            # paired seeds per CC scenario (in sample and held out)
    flaps: str = DEFAULT_FLAPS
    margin: float = 1.5
    probe: bool = False
    calibration: object = None
    free_servers: list[int] | None = None
    seed: int = 0
    scheduler: str | None = None   # Dask scheduler address; None = local processes
    workers: int = 2
    place_iterations: int = 3000
    adaptive_retrans: bool = False
    background: list = field(default_factory=list)  # tuner.background.BackgroundJob s


@dataclass
class Recommendation:
    """Everything the output files and the report are made of."""

    fabric: str
    job: dict
    settings: list[Setting]
    env: dict[str, str]
    env_reasons: dict[str, str]
    tuner_rows: list[TunerRow]
    nic_rp: dict[str, int]
    nic_np: dict[str, int]
    ecn: dict
    headroom_ports: list[dict]
    ranks: list[dict]
    iteration_default_s: float
    iteration_recommended_s: float
    summary: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    placement_strategy: str = "topo"   # what placement.json holds: topo, or linear kept

    def to_json(self) -> dict:
        return {"fabric": self.fabric, "job": self.job, "env": self.env,
                "placement_strategy": self.placement_strategy,
                "iteration_default_s": self.iteration_default_s,
                "iteration_recommended_s": self.iteration_recommended_s,
                "settings": [s.__dict__ for s in self.settings], "summary": self.summary,
                "details": self.details, "notes": self.notes}


def _headroom_ports(fabric) -> list[dict]:
    """PFC headroom per port class (link kind x speed, the tier's cable length)."""
    from tuner.switchports import headroom_ports

    return headroom_ports(fabric)


def _qos_from_probe(enabled: bool, nics_per_server: int) -> tuple[dict, str]:
    """(HCA list / GID index env, where they came from)."""
    hcas = ",".join(f"mlx5_{i}" for i in range(nics_per_server))
    env = {"NCCL_IB_HCA": "=" + hcas}
    if not enabled:
        return env, f"fabric file: {nics_per_server} NICs per server, assumed mlx5_0..{nics_per_server - 1}"
    from tuner.probe import probe

    res = probe()
    if not res.found:
        return env, f"probe: {res.reason}; fell back to the fabric file"
    roce = [d for d in res.devices if any(p.link_layer == "Ethernet" for p in d.ports)]
    env["NCCL_IB_HCA"] = "=" + ",".join(d.name for d in roce or res.devices)
    gids = {p.nccl_gid_index for d in roce for p in d.ports if p.nccl_gid_index is not None}
    if len(gids) == 1:
        env["NCCL_IB_GID_INDEX"] = str(gids.pop())
    return env, f"probe ({res.source}): {len(res.devices)} RDMA devices"


@dataclass
class _Run:
    """State one recommendation run builds up step by step: the report's rows, the env lines
    (in the order ``nccl.env`` writes them) and their reasons."""

    fabric: object
    job: object
    opts: RecommendOptions
    say: object
    settings: list[Setting] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    #: the placement applied ("topo" or "linear") and topo's paired out-of-sample check
    placement: str = "linear"
    placement_check: dict | None = None
    retransmit_check: dict | None = None

    def set_env(self, name: str, value, reason: str | None = None) -> None:
        self.env[name] = str(value)
        if reason is not None:
            self.why[name] = reason


def recommend(fabric, job, opts: RecommendOptions | None = None, progress=None) -> Recommendation:
    """Run every search and assemble the recommendation.

    Parameters
    ----------
    fabric
        ``topologies.Fabric``.
    job
        ``netsim.workload.JobSpec``.
    opts
        :class:`RecommendOptions`.
    progress
        Optional ``progress(step_name, fraction_done)`` callback.
    """
    run = _Run(fabric, job, opts or RecommendOptions(), progress or (lambda *_: None))
    places, place_verdict = _step_placement(run)
    topo = places[run.placement]  # the placement applied
    qp = _step_qps(run, topo)
    coll, rows = _step_collectives(run, topo.gpu_of_rank, qp.qps)
    cc, (nic_rp, nic_np, ecn) = _step_congestion_control(run, topo.gpu_of_rank, qp.qps)
    rt = _step_retransmit(run)
    ports = _step_qos(run)
    t_def, t_rec = _step_iteration_time(run, places, qp)
    run.say("done", 1.0)
    return Recommendation(
        fabric.name, job.to_dict(), run.settings, run.env, run.why, rows, nic_rp, nic_np, ecn,
        ports, topo.ranks(fabric), t_def, t_rec,
        _summary(run, place_verdict, t_def, t_rec, cc, topo.gpu_of_rank), _notes(run.opts),
        details={**_details(run.opts, places, qp, coll, cc, rt),
                 "placement_check": run.placement_check,
                 "retransmit_check": run.retransmit_check},
        placement_strategy=topo.strategy)


def _step_placement(run: _Run) -> tuple[dict, str]:
    """Topology-aware placement against the scheduler's order: (placements, verdict)."""
    from tuner import placement

    fabric, job, opts = run.fabric, run.job, run.opts
    run.say("placement", 0.0)
    places = placement.compare_strategies(fabric, job, opts.free_servers, seed=opts.seed,
                                          calibration=opts.calibration,
                                          search_iterations=opts.place_iterations,
                                          strategies=("topo", "linear"),
                                          background=opts.background)
    run.placement = "topo" if _topo_gains(places) and _topo_holds(run, places) else "linear"
    kept = "" if run.placement == "topo" else "; recommended: linear, the scheduler's order"
    if run.placement_check:
        kept += "; " + run.placement_check["reason"]
    verdict = placement.verdict(places) + kept + "; " + placement.load_context(
        fabric, job, places["linear"].gpu_of_rank, opts.background, opts.seed)
    run.settings.append(Setting(
        "rank placement", "placement", "linear (scheduler order)",
        "topo (placement.json)" if run.placement == "topo" else "linear (scheduler order)",
        "TP in a server, heaviest groups under one ToR set then one pod, DP on one rail, "
        "local search; kept the candidate with the best simulated iteration time "
        f"(ties within {placement.SCORE_RTOL:.1%}: fewest hop-weighted bytes), never one "
        "predicted slower than the scheduler's order; applied only if shorter with 95% "
        "confidence over 5 paired ECMP seeds and no longer held out", verdict))
    return places, verdict


def _topo_holds(run: _Run, places: dict) -> bool:
    """topo against the scheduler's order, paired over ECMP seeds in sample and held out."""
    from tuner.outofsample import check_placement

    opts = run.opts
    check = check_placement(run.fabric, run.job, places["topo"].gpu_of_rank,
                            places["linear"].gpu_of_rank, seed=opts.seed,
                            calibration=opts.calibration, background=opts.background)
    run.placement_check = check.as_dict()
    return check.accepted


def _topo_gains(places: dict) -> bool:
    from tuner.placement import topo_gains

    return topo_gains(places)


def _step_qps(run: _Run, topo):
    """``NCCL_IB_QPS_PER_CONNECTION`` (by ``netsim predict``'s iteration time on the chosen
    placement) and ``NCCL_IB_SPLIT_DATA_ON_QPS``."""
    from tuner import search

    run.say("QPs per connection", 0.2)
    candidates = (1, 2, 4, 8)
    done = iter(range(1, len(candidates) + 1))
    opts = run.opts
    known = {} if topo.iteration_s is None else {1: topo.iteration_s}  # the placement's score
    qp = search.search_qps(run.fabric, run.job, topo.gpu_of_rank, candidates=candidates,
                           seed=opts.seed, calibration=opts.calibration,
                           background=opts.background, known_s=known,
                           progress=lambda: run.say("QPs per connection",
                                                    0.2 + 0.15 * next(done) / len(candidates)))
    qp = _confirm_qps(run, topo.gpu_of_rank, qp)
    run.set_env("NCCL_IB_QPS_PER_CONNECTION", qp.qps, qp.reason)
    run.set_env("NCCL_IB_SPLIT_DATA_ON_QPS", qp.split_data)
    run.settings.append(Setting(
        "NCCL_IB_QPS_PER_CONNECTION", "nccl", 1, qp.qps, qp.reason,
        f"predicted iteration {qp.iteration_s[1]:.4f} -> {qp.iteration_s[qp.qps]:.4f} s"))
    run.settings.append(Setting(
        "NCCL_IB_SPLIT_DATA_ON_QPS", "nccl", 0, qp.split_data,
        "round-robin whole messages: a ring's many chunks spread evenly over the QPs without "
        "a work request per QP per message",
        "no bandwidth change in the flow engine (bytes spread evenly either way)"))
    return qp


def _confirm_qps(run: _Run, gpu_of_rank: np.ndarray, qp):
    """More than 1 QP only if shorter in sample and no longer held out, paired over seeds."""
    import dataclasses

    from tuner.outofsample import check_qps

    if qp.qps == 1:
        return qp
    opts = run.opts
    known = {(q, opts.seed): t for q, t in qp.iteration_s.items()}  # the search's own scores
    check = check_qps(run.fabric, run.job, gpu_of_rank, qp.qps, seed=opts.seed,
                      calibration=opts.calibration, background=opts.background, known_s=known)
    reason = f"{qp.reason}; {check.reason}"
    if check.accepted:
        return dataclasses.replace(qp, reason=reason, check=check.as_dict())
    return dataclasses.replace(qp, qps=1, reason=reason, check=check.as_dict())


def _step_collectives(run: _Run, gpu_of_rank: np.ndarray, qps: int):
    """Algorithm/protocol per size of the DP all-reduce: (search result, ``nccl_tuner.csv`` rows)."""
    from tuner import search

    run.say("collectives", 0.35)
    job = run.job
    groups = search.job_groups(job, gpu_of_rank)
    dp_group = groups["dp"][0] if "dp" in groups else gpu_of_rank[:min(8, job.world)]
    n_sizes = len(search.COLLECTIVE_SIZES)
    done = iter(range(1, n_sizes + 1))
    coll = search.search_collectives(run.fabric, dp_group.tolist(), qps=qps,
                                     progress=lambda: run.say("collectives",
                                                              0.35 + 0.15 * next(done) / n_sizes))
    kept = _confirm_rows(run, coll, dp_group.tolist(), qps)
    # channels -1: NCCL keeps its own channel count (the model has no per-channel term to
    # choose one); the suite's plugin touches nothing for -1 (tuner.tunerplugin)
    rows = [TunerRow("allreduce", r["min_bytes"], r["max_bytes"], r["algo"], r["proto"],
                     -1, coll.n_nodes, coll.ranks) for r in kept]
    left = len(coll.rows) - len(kept)
    big = coll.rows[-1]
    gains = ", ".join(f"{r['size'] >> 10} KiB {r['algo']}/{r['proto']} "
                      f"{r['default_time_s'] * 1e6:.0f}->{r['time_s'] * 1e6:.0f} us"
                      for r in coll.rows[::3])
    run.settings.append(Setting("NCCL algorithm/protocol per size (nccl_tuner.csv)", "nccl",
                                "NCCL's internal tuner", f"{len(rows)} rows",
                                f"fastest of ring/tree x LL/LL128/Simple in the collective "
                                f"model for the {coll.ranks}-rank DP all-reduce; a row is "
                                f"written only if faster than ring/simple with 95% confidence "
                                f"over 5 paired seeds and no slower at other sizes of its "
                                f"bucket on 5 held-out seeds ({left} bucket(s) left to NCCL's "
                                f"own tuner)",
                                f"{gains}; largest bucket {big['algo']}/{big['proto']}"))
    run.set_env("NCCL_TUNER_CONFIG_FILE", "nccl_tuner.csv",
                "read by the suite's tuner plugin (NCCL_TUNER_PLUGIN below); rows "
                "name the DP communicator's nNodes/nRanks, every other collective and "
                "communicator keeps NCCL's own choice")
    return coll, rows


def _confirm_rows(run: _Run, coll, ranks: list, qps: int) -> list[dict]:
    """The search's rows that hold out of sample; each row records its check."""
    from tuner.outofsample import check_collective_row

    kept = []
    for r in coll.rows:
        check = check_collective_row(run.fabric, ranks, r, qps=qps, seed=run.opts.seed)
        r["check"] = check.as_dict()
        if check.accepted:
            kept.append(r)
    return kept


def _step_congestion_control(run: _Run, gpu_of_rank: np.ndarray, qps: int):
    """DCQCN/ECN search on the job's own congestion points (with the QPs it will run):
    (search result, (nic_rp, nic_np, ecn))."""
    from tuner import ccreport

    run.say("congestion control", 0.5)
    cc = ccreport.run(run.fabric, run.job, gpu_of_rank, qps, run.opts)
    return cc, ccreport.settings_rows(cc, run.settings)


def _step_retransmit(run: _Run):
    """``NCCL_IB_TIMEOUT`` / ``NCCL_IB_RETRY_CNT`` from the flap model."""
    from tuner import retransmit

    run.say("retransmit", 0.85)
    opts = run.opts
    flaps = retransmit.parse_flaps(opts.flaps)
    rt = _confirm_retransmit(run, flaps,
                             retransmit.recommend_retransmit(flaps, opts.margin,
                                                             opts.adaptive_retrans))
    run.env.update(rt.env())
    run.why["NCCL_IB_TIMEOUT"] = rt.reason
    d, r = rt.default, rt.recommended
    eff = (f"survival per flap {d.survival_per_flap:.3f} -> {r.survival_per_flap:.3f}, job "
           f"{d.job_survival:.3f} -> {r.job_survival:.3f}; expected stall per flap "
           f"{d.expected_stall_s:.2f} -> {r.expected_stall_s:.2f} s; dead-link detection "
           f"{d.setting.failure_detection_s:.1f} -> {r.setting.failure_detection_s:.1f} s")
    run.settings.append(Setting("NCCL_IB_TIMEOUT", "nccl", d.setting.timeout, r.setting.timeout,
                                rt.reason, eff))
    run.settings.append(Setting("NCCL_IB_RETRY_CNT", "nccl", d.setting.retry_cnt,
                                r.setting.retry_cnt, f"retry window "
                                f"{r.setting.survivable_flap_s:.2f} s = timeout x retries", eff))
    return rt


def _confirm_retransmit(run: _Run, flaps, rt):
    """The recommended timeout/retries only if their stall per flap is shorter than the
    defaults' over seeded flap draws and no longer on held-out draws; else the defaults."""
    import dataclasses

    from tuner.outofsample import check_retransmit

    d, r = rt.default.setting, rt.recommended.setting
    if (d.timeout, d.retry_cnt) == (r.timeout, r.retry_cnt):
        return rt
    check = check_retransmit(flaps, d, r, seed=run.opts.seed)
    run.retransmit_check = check.as_dict()
    if check.accepted:
        return dataclasses.replace(rt, reason=f"{rt.reason}; {check.reason}")
    return dataclasses.replace(rt, recommended=rt.default, reason=f"defaults kept: {check.reason}")


def _step_qos(run: _Run) -> list[dict]:
    """Traffic class, HCA list / GID index, and PFC headroom per port class (returned)."""
    run.say("QoS", 0.9)
    qos_env, qos_src = _qos_from_probe(run.opts.probe, int(run.fabric.nics_per_server))
    tc_why = (f"DSCP {ROCE_DSCP} (AF31) with ECT(0): the lossless RoCE class, PFC priority "
              f"{ROCE_PRIO}")
    run.set_env("NCCL_IB_TC", NCCL_IB_TC, tc_why)
    run.settings.append(Setting("NCCL_IB_TC", "nccl", 0, NCCL_IB_TC, tc_why,
                                "RoCE traffic lands in the PFC/ECN class the switch config sets up"))
    for k, v in qos_env.items():
        run.set_env(k, v, qos_src)
        run.settings.append(Setting(k, "nccl", "unset (auto)", v, qos_src,
                                    "pins NCCL to the compute NICs"))
    ports = _headroom_ports(run.fabric)
    for p in ports:
        run.settings.append(Setting(
            f"PFC headroom {p['link_kind']} {p['port_speed_gbps']:g}G {p['cable_m']:g} m",
            "switch", "vendor profile", f"{p['headroom_bytes']} B",
            "2 x frame + 2 x cable bytes + peer response (SONiC formula, IEEE 802.3 pause "
            "quanta; the need netsim simulate checks); cable: the tier's length in the fabric "
            "file (default: SONiC's per-role cable)",
            "no drops on the lossless class while PAUSE takes effect"))
    from tuner.switchports import watchdog_row

    run.settings.append(watchdog_row(run.fabric, run.env))
    return ports


def _step_iteration_time(run: _Run, places: dict, qp) -> tuple[float, float]:
    """Predicted iteration with the defaults (scheduler order, 1 QP) and as recommended: the
    placement search's and the QP search's own ``predict`` scores (one scorer, one model)."""
    from tuner import placement

    run.say("iteration time", 0.95)
    t_def = places["linear"].iteration_s
    if t_def is None:
        opts = run.opts
        t_def = placement.iteration_scorer(
            run.fabric, run.job, calibration=opts.calibration, qps=1, seed=opts.seed,
            background=opts.background)(places["linear"].gpu_of_rank)
    return t_def, qp.iteration_s[qp.qps]


def _summary(run: _Run, place_verdict: str, t_def: float, t_rec: float, cc,
             gpu_of_rank: np.ndarray) -> dict:
    from tuner import ccreport

    fabric, job = run.fabric, run.job
    return {
        "fabric": fabric.name, "job": f"{job.model_config().name} tp={job.tp} cp={job.cp} "
        f"ep={job.ep} pp={job.pp} dp={job.dp} ({job.world} GPUs) on {job.gpu}",
        "placement": place_verdict,
        "predicted iteration (defaults: scheduler order, 1 QP)": f"{t_def:.4f} s",
        "predicted iteration (placement + QPs recommended)": f"{t_rec:.4f} s "
        f"({(t_def / t_rec - 1) * 100:+.2f}% throughput)",
        "CC congestion points": "; ".join(cc.found) or "none (no network collective)",
        "dominant traffic": _dominant(job, gpu_of_rank, fabric),
        "CC result": ccreport.summary(cc),
    }


def _notes(opts: RecommendOptions) -> list[str]:
    from tuner import ccsearch, placement

    return [
        "Iteration times come from netsim.workload.predict on the flow engine (every "
        "collective of a kind, all groups at once, sharing the fabric under max-min, as "
        "netsim predict does), with the background jobs' traffic when given; DCQCN dynamics, "
        "the retransmit setting and the tuner CSV are reported on their own rows (their own "
        "simulators).",
        f"Flap model: {opts.flaps} (margin {opts.margin:g}x); a failed flap costs a job "
        "restart of 600 s in the expected stall (assumption).",
        f"QP counts predicted within {placement.SCORE_RTOL:.1%} of the fastest are a tie, "
        "won by the fewest QPs (their NIC state and work requests are not priced: an "
        "assumption); the CC scenarios "
        f"uses a {ccsearch.BUFFER_PER_PORT_BYTES // 1000} KB/port switch buffer (assumption).",
    ]


def _details(opts: RecommendOptions, places: dict, qp, coll, cc, rt) -> dict:
    from tuner import ccreport

    return {"placement": {k: v.to_json() for k, v in places.items()},
            "qps": {"iteration_s": qp.iteration_s, "slowdown": qp.slowdown, "cost": qp.cost,
                    "check": qp.check},
            "collectives": coll.rows,
            "cc": ccreport.details(cc),
            "retransmit": {"flaps": opts.flaps, "margin": opts.margin,
                           "design_flap_s": rt.design_flap_s,
                           "default": _rt_json(rt.default),
                           "recommended": _rt_json(rt.recommended)}}


def _dominant(job, gpu_of_rank, fabric) -> str:
    from tuner.traffic_report import dominant_summary

    return dominant_summary(job, np.asarray(gpu_of_rank), fabric)


def _rt_json(r) -> dict:
    s = r.setting
    return {"timeout": s.timeout, "retry_cnt": s.retry_cnt, "timeout_s": s.timeout_s,
            "survivable_flap_s": s.survivable_flap_s, "failure_detection_s": s.failure_detection_s,
            "survival_per_flap": r.survival_per_flap, "job_survival": r.job_survival,
            "expected_stall_s": r.expected_stall_s}


def write_outputs(rec: Recommendation, outdir: Path, fabric=None,
                  manifest: dict | None = None) -> list[Path]:
    """Write the six files into ``outdir``, plus the deployable scripts and switch configs of
    ``tuner.deploy`` when the fabric is given, as one set (``tuner.outputs.output_set``:
    written aside, ``manifest.json`` last with ``manifest``'s run facts, renamed into place,
    an earlier set replaced whole); returns their paths in ``outdir``."""
    from tuner import deploy, render
    from tuner.outputs import MANIFEST, RECOMMEND_FILES, output_set

    final = Path(outdir)
    with output_set(final, manifest, legacy=RECOMMEND_FILES) as stage:
        paths = {n: stage / n for n in ("nccl.env", "nccl_tuner.csv", "nic_dcqcn.conf",
                                        "switch_qos.yaml", "placement.json", "report.md")}
        plugin_files = deploy.complete_env(rec.env, rec.env_reasons, stage, final_dir=final)
        render.write_nccl_env(paths["nccl.env"], rec.env, rec.env_reasons)
        render.write_tuner_csv(paths["nccl_tuner.csv"], rec.tuner_rows)
        render.write_nic_conf(paths["nic_dcqcn.conf"], rec.nic_rp, rec.nic_np, ROCE_PRIO)
        render.write_switch_qos(paths["switch_qos.yaml"], rec.ecn, rec.headroom_ports,
                                priority=ROCE_PRIO, cnp_priority=CNP_PRIO, dscp=ROCE_DSCP,
                                cnp_dscp=CNP_DSCP)
        render.write_placement(paths["placement.json"], rec.ranks,
                               {"strategy": rec.placement_strategy, "fabric": rec.fabric,
                                "job": rec.job,
                                "predicted_iteration_s": rec.iteration_recommended_s})
        render.write_report(paths["report.md"],
                            f"Recommendation: {rec.job['model']} on {rec.fabric}",
                            rec.settings, rec.summary, rec.notes)
        extra = [] if fabric is None else deploy.write_deployables(
            stage, fabric, rp=rec.nic_rp, np_=rec.nic_np, ecn=rec.ecn, priority=ROCE_PRIO,
            cnp_priority=CNP_PRIO, dscp=ROCE_DSCP, cnp_dscp=CNP_DSCP)
    names = [p.name for p in [*paths.values(), *plugin_files, *extra]]
    return [final / n for n in [*names, MANIFEST]]
