"""The congestion-control part of ``netsim recommend``: run the search, explain every value.

Every NIC DCQCN and switch ECN value written to ``nic_dcqcn.conf`` / ``switch_qos.yaml`` gets
a report row saying why it has that value: the defaults stand because the job has no
congestion point (and what the flow engine found on each collective's hottest link), or the
search kept it / moved it, with the effect on every scenario of the job's traffic.
"""

from __future__ import annotations

from tuner import ccsearch, provenance
from tuner.qos import CNP_DSCP, CNP_PRIO
from tuner.render import Setting

#: search name -> (file section, ConnectX sysfs name)
NIC_NAMES = {"rpg_time_reset_us": ("roce_rp", "rpg_time_reset"),
             "rpg_byte_reset": ("roce_rp", "rpg_byte_reset"),
             "rpg_ai_rate_mbps": ("roce_rp", "rpg_ai_rate"),
             "rpg_hai_rate_mbps": ("roce_rp", "rpg_hai_rate"),
             "dce_tcp_g": ("roce_rp", "dce_tcp_g"),
             "min_time_between_cnps_us": ("roce_np", "min_time_between_cnps")}
ECN_NAMES = (("ecn_kmin_bytes", "ECN Kmin (bytes)"), ("ecn_kmax_bytes", "ECN Kmax (bytes)"),
             ("ecn_pmax", "ECN Pmax"))


def run(fabric, job, gpu_of_rank, qps: int, opts, progress=None) -> ccsearch.CcJobChoice:
    """Scenarios of the job's own traffic (with the QPs it will use), then the search."""
    scenarios, found = ccsearch.job_scenarios(fabric, job, gpu_of_rank, qps=qps, seed=opts.seed)
    if progress:
        progress(len(scenarios))
    workers = opts.workers if opts.workers is not None else (0 if opts.scheduler is None else None)
    return ccsearch.search_job_cc(scenarios, found, budget=opts.budget, seed=opts.seed,
                                  workers=workers, scheduler=opts.scheduler,
                                  samples=opts.cc_samples)


def effect_text(cc: ccsearch.CcJobChoice) -> str:
    """One line per scenario: goodput, p99 FCT and PFC pause time, defaults -> choice, with
    the paired ratio's 90% interval; then the held-out scenarios of the in-sample best."""
    if not cc.scenarios:
        return "no packet run needed: nothing queues on the RoCE class"
    if cc.candidate is None:
        return "defaults on the job's scenarios: " + "; ".join(
            f"{e['scenario']}: goodput {e['goodput_default']:.3f}, p99 FCT "
            f"{e['p99_fct_us_default']:.1f} us, PFC pause {e['pause_us_default']:.1f} us"
            for e in cc.effects())
    who = "refused setting" if cc.refused else "choice"
    parts = [f"in sample ({who}, {len(cc.seeds)} paired seeds): "
             + "; ".join(_effect(e) for e in cc.candidate_effects())]
    parts.append(f"held out ({who}, {len(cc.held_out_seeds)} other seeds): "
                 + "; ".join(_effect(e) for e in cc.held_out_effects()))
    return "; ".join(parts)


def _effect(e: dict) -> str:
    return (f"{e['scenario']}: goodput {e['goodput_default']:.3f} -> {e['goodput']:.3f} "
            f"(x{e['goodput_ratio']:.3f} [{e['goodput_ratio_lo']:.3f}, {e['goodput_ratio_hi']:.3f}]), "
            f"p99 FCT {e['p99_fct_us_default']:.1f} -> {e['p99_fct_us']:.1f} us "
            f"(x{e['p99_fct_ratio']:.3f} [{e['p99_fct_ratio_lo']:.3f}, {e['p99_fct_ratio_hi']:.3f}]), "
            f"PFC pause {e['pause_us_default']:.1f} -> {e['pause_us']:.1f} us")


def why_text(cc: ccsearch.CcJobChoice, key: str) -> str:
    """Why parameter *key* has its recommended value."""
    if not cc.scenarios:
        return (f"{provenance.kept_label(key)}: the job has no congestion point (flow engine, steady "
                "state, with the recommended QPs: " + "; ".join(cc.found) + "), so no queue "
                "builds past ECN Kmin, DCQCN does not act and no setting changes the job "
                "(start-up bursts are not modelled)")
    n = len(cc.evaluated) - 1
    if key in cc.changed:
        return f"moved by the search of {n} settings: {cc.status}"
    return (f"{provenance.kept_label(key)}: {cc.status}" if not cc.changed else
            f"{provenance.kept_label(key)}: the chosen setting moves only {', '.join(cc.changed)}")


def settings_rows(cc: ccsearch.CcJobChoice, rows: list[Setting]) -> tuple[dict, dict, dict]:
    """Append the NIC and switch rows to *rows*; return nic_rp, nic_np and ecn values."""
    d, b = cc.default.params, cc.best.params
    effect = effect_text(cc)
    rp, np_ = {}, {"cnp_dscp": CNP_DSCP, "cnp_802p_prio": CNP_PRIO}
    for key, (section, name) in NIC_NAMES.items():
        (rp if section == "roce_rp" else np_)[name] = _firmware(b[key])
        rows.append(Setting(f"{section}/{name}", "nic", _firmware(d[key]), _firmware(b[key]),
                            why_text(cc, key), effect))
    dcfg, bcfg = ccsearch.to_engine(d)[0], ccsearch.to_engine(b)[0]
    ecn = {"kmin_bytes": bcfg["ecn_kmin_bytes"], "kmax_bytes": bcfg["ecn_kmax_bytes"],
           "pmax": round(bcfg["ecn_pmax"], 4)}
    for key, name in ECN_NAMES:
        src = "ecn_kmax_ratio" if key == "ecn_kmax_bytes" else key
        dv, bv = dcfg[key], bcfg[key]
        if key == "ecn_pmax":
            dv, bv = round(dv, 4), round(bv, 4)
        rows.append(Setting(name, "switch", dv, bv, why_text(cc, src), effect))
    return rp, np_, ecn


def _firmware(v):
    """Firmware takes integers: an integral float prints as an int."""
    f = float(v)
    return int(f) if f.is_integer() else f


def summary(cc: ccsearch.CcJobChoice) -> str:
    """The report's one-line CC result."""
    moved = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in cc.changed.items()) or "none"
    return f"{cc.status}; changed: {moved}; {effect_text(cc)}"


def details(cc: ccsearch.CcJobChoice) -> dict:
    """The JSON details of the CC search."""
    import dataclasses

    from tuner.acceptance import CONFIDENCE

    return {"found": cc.found, "scenarios": [dataclasses.asdict(f) for f in cc.scenarios],
            "status": cc.status, "default": cc.default.params, "chosen": cc.best.params,
            "changed": {k: list(v) for k, v in cc.changed.items()}, "effects": cc.effects(),
            "held_out": [dataclasses.asdict(f) for f in cc.held_out],
            "candidate_effects": cc.candidate_effects(),
            "held_out_effects": cc.held_out_effects(),
            "refused": [{"params": s.params, "verdict": s.verdict} for s in cc.refused],
            "evaluated": [_evaluated(cc, s) for s in cc.evaluated],
            "seeds": list(cc.seeds), "held_out_seeds": list(cc.held_out_seeds),
            "confidence": CONFIDENCE,
            "margins": {m.name: m.margin for m in ccsearch.METRICS},
            "tie_margin": ccsearch.TIE_MARGIN}


def _evaluated(cc: ccsearch.CcJobChoice, s: ccsearch.CcSetting) -> dict:
    """One evaluated setting; those taken to all seeds carry their in-sample effects."""
    seeds = len(s.samples[0]) if s.samples else 0
    full = cc.scenarios and seeds == len(cc.seeds)
    return {"params": s.params, "accepted": s.accepted, "better": s.better, "score": s.score,
            "seeds": seeds, "verdict": s.verdict,
            "effects": ccsearch.effects(s, cc.default, cc.scenarios) if full else []}
