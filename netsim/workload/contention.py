"""Traffic of different kinds on the same links: one max-min allocation for all of them.

``predict`` prices each kind's batch (all EP groups, all DP groups, ...) on the flow engine
as if it ran alone. In an iteration some kinds overlap in time: the expert all-to-alls and
the pipeline sends of the backward run while the gradient reduction of earlier layers
streams out (``dp_grad_reduce`` overlap), and CP rings run beside the all-to-alls. Where
they share links, each gets less.

``joint_slowdown(model, batches, loc)`` measures it: every batch's connections (as
``FlowCommModel`` builds them) go into one steady max-min allocation; each call's time is
latency + bytes at its slowest commodity's rate, and the slowdown of a kind is its slowest
call's time together over alone. Every connection is its own commodity here (an all-to-all
too), so that max-min shares a link per connection, as the NICs' QPs do. ``predict(..., contention=True)`` multiplies the times of
the kinds that overlap by these factors (an upper bound: it assumes they are in flight at
the same moment for their whole duration).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netsim.workload.comm import CommBatch, Locality, group_scopes
from netsim.workload.flowcomm import OPS, _call_times


def _network_part(batch: CommBatch, loc: Locality) -> tuple[np.ndarray, np.ndarray]:
    groups = np.atleast_2d(np.asarray(batch.groups, dtype=np.int64))
    sizes = batch.sizes()
    net = (group_scopes(groups, loc) > 0) & (sizes > 0)
    return groups[net], sizes[net]


def _slowest_rule(model, parts):
    """Only each part's slowest call is read (``_call_times(...).max()``): the stop rule of an
    allocation of the parts' commodities in this order, one segment per part (None where the
    model does not stop early)."""
    from netsim.flow.maxmin import Slowest

    if not (getattr(model, "stop_at_slowest", False) and model.sharing.stops_early):
        return None
    seg, lat, size, bpb = [], [], [], []
    for i, (bt, sz) in enumerate(parts):
        c = bt.com_call
        seg.append(np.full(bt.inc.num_flows, i, np.int64))
        lat.append(bt.latency_s[c])
        size.append(np.asarray(sz, np.float64)[c])
        bpb.append(bt.bits_per_byte)
    return Slowest(segment=np.concatenate(seg), latency_s=np.concatenate(lat),
                   size_bytes=np.concatenate(size), bits_per_byte=np.concatenate(bpb),
                   floor_s=np.full(len(parts), -np.inf))


def joint_slowdown(model, batches: Sequence[CommBatch], loc: Locality) -> dict[str, float]:
    """Slowdown (>= 1 where links are shared) of each batch's slowest call when all
    ``batches`` share one allocation, keyed by ``batch.kind``.

    ``model`` is a ``FlowCommModel``; batches with no network call get 1.0. Send batches are
    taken as one round (every pair in flight), as the steady allocation of a 1F1B exchange.
    """
    from netsim.flow.maxmin import Incidence

    if model.fabric is None:
        return {b.kind: 1.0 for b in batches}
    parts = []
    for b in batches:
        groups, sizes = _network_part(b, loc)
        if len(groups):
            # one commodity per connection: max-min shares links per connection (QP)
            parts.append((b.kind, model._build(OPS[b.op], groups, sizes, together=False), sizes))
    out = {b.kind: 1.0 for b in batches}
    if len(parts) < 2:
        return out
    alone = {k: _call_times(bt, sz, model.sharing.rates(
        bt.inc, bt.capacity_bps, slowest=_slowest_rule(model, [(bt, sz)]))).max()
             for k, bt, sz in parts}
    flows, links, weights, counts, offset = [], [], [], [], 0
    for _, bt, _ in parts:
        inc = bt.inc
        flows.append(inc.e_flow + offset)
        links.append(inc.e_link)
        weights.append(inc.e_weight)
        counts.append(inc.e_count)
        offset += inc.num_flows
    joint = Incidence._build(parts[0][1].inc.num_links, offset, np.concatenate(flows),
                             np.concatenate(links), np.concatenate(weights),
                             np.concatenate(counts))
    rate = model.sharing.rates(joint, parts[0][1].capacity_bps,
                               slowest=_slowest_rule(model, [(bt, sz) for _, bt, sz in parts]))
    model.runs += 1 + len(parts)
    start = 0
    for kind, bt, sz in parts:
        together = _call_times(bt, sz, rate[start:start + bt.inc.num_flows]).max()
        start += bt.inc.num_flows
        out[kind] = max(out[kind], float(together / alone[kind])) if alone[kind] > 0 else 1.0
    return out


def kind_batches(job, model, grid4: np.ndarray) -> dict[str, CommBatch]:
    """One batch per network kind that runs during the pipeline's steady state: every EP
    group's all-to-all, every stage boundary's send, every CP ring, every DP group's
    per-layer gradient reduction (only when it overlaps the backward)."""
    import netsim.workload.layout as layout
    from netsim.workload.volumes import cp_kv_width, ep_bytes

    p, out = job.pp, {}
    act = job.micro_batch * model.seq // job.cp * model.hidden * job.act_bytes
    if job.ep > 1:
        groups = np.concatenate([layout.expert_groups(job, grid4, q)[0] for q in range(p)])
        out["ep"] = CommBatch("all_to_all", "ep", groups, ep_bytes(job, model))
    if p > 1:
        pairs = np.concatenate([np.stack([grid4[q].ravel(), grid4[q + 1].ravel()], axis=1)
                                for q in range(0, p - 1, 2)])
        split = job.tp if (job.scatter_gather or job.sequence_parallel) else 1
        out["pp"] = CommBatch("send", "pp", pairs, act / split)
    if job.cp > 1:
        groups = np.concatenate([layout.cp_groups(grid4, q) for q in range(p)])
        kv = job.micro_batch * model.seq // job.cp * cp_kv_width(model, job.tp) * job.act_bytes
        out["cp"] = CommBatch("all_gather", "cp", groups, kv * job.cp)
    if job.overlap.dp_grad_reduce and not job.fsdp and job.dp * job.cp > 1:
        groups = np.concatenate([layout.replica_groups(grid4, q) for q in range(p)])
        op = "reduce_scatter" if job.distributed_optimizer else "all_reduce"
        out["dp"] = CommBatch(op, "dp", groups, model.layer_params() / job.tp * job.grad_bytes)
    return out


def contention_factors(model, batches: dict[str, CommBatch], loc: Locality,
                       busy_s: dict[str, float], window_s: float) -> dict[str, float]:
    """Time multiplier of every kind: ``1 + sum_j (s_kj - 1) min(1, busy_j / window)``, with
    ``s_kj`` the slowdown of kind k when kind j shares the allocation (``joint_slowdown``)
    and ``busy_j / window`` the fraction of the pipeline's duration kind j is on the wire."""
    kinds = list(batches)
    factor = {k: 1.0 for k in kinds}
    for i, a in enumerate(kinds):
        for b in kinds[i + 1:]:
            s = joint_slowdown(model, [batches[a], batches[b]], loc)
            for k, other in ((a, b), (b, a)):
                duty = min(1.0, busy_s.get(other, 0.0) / window_s) if window_s > 0 else 0.0
                factor[k] += (s[k] - 1.0) * duty
    return factor
