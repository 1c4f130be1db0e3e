"""The fluid event loop: rates are recomputed only when a commodity starts or finishes.

A *commodity* is what the sharing model allocates one rate to: a plain flow (one QP), or a
lockstep group (a NCCL ring channel whose member QPs all move at the pace of the slowest; its
incidence weight on a link is the number of its QPs there). Commodities belong to *phases*;
the phases of one *chain* run one after the other (a collective's reduce-scatter, inter-server
all-reduce, all-gather), and a phase's fixed latency is added after its data has moved. Chains
start at their own times; all active commodities of all chains share the fabric.

Time is integer picoseconds. Between two events every rate is constant, so each commodity's
remaining bits fall linearly; the next event is the earliest release or completion (rounded up
to the next picosecond, so flows finishing within the same picosecond complete together).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.flow.maxmin import Incidence
from netsim.flow.maxmin_fast import drop_trace
from netsim.flow.sharing import SharingModel
from topologies.units import PS_PER_S

_NEVER = np.iinfo(np.int64).max


@dataclass
class FluidProblem:
    """Inputs of :func:`run_fluid`.

    Attributes
    ----------
    inc : Incidence
        Commodity/link incidence (weights = QPs per link).
    capacity_bps : np.ndarray
        Capacity of every link (failed links may be given capacity 0: nothing routes there).
    size_bits : np.ndarray[float]
        Bits each commodity moves (per member QP for a group).
    phase : np.ndarray[int]
        Phase of each commodity.
    phase_chain : np.ndarray[int]
        Chain of each phase; phases of a chain are ordered by their index.
    phase_latency_ps : np.ndarray[int]
        Fixed latency added at the end of each phase.
    chain_start_ps : np.ndarray[int]
        Release time of each chain's first phase.
    persistent : np.ndarray[bool], optional
        Commodities that never finish (another job's traffic sharing the fabric): they take
        their share from the release of their phase on, their ``size_bits`` is ignored, and the
        run ends when every other commodity is done. Their phases and chains never end.
    """

    inc: Incidence
    capacity_bps: np.ndarray
    size_bits: np.ndarray
    phase: np.ndarray
    phase_chain: np.ndarray
    phase_latency_ps: np.ndarray
    chain_start_ps: np.ndarray
    persistent: np.ndarray | None = None


@dataclass
class FluidResult:
    """Outputs of :func:`run_fluid`.

    Attributes
    ----------
    done_ps : np.ndarray[int64]
        When each commodity's last bit left (``_NEVER`` if it could not move).
    phase_end_ps : np.ndarray[int64]
        Data done plus the phase latency, per phase.
    chain_end_ps : np.ndarray[int64]
        End of each chain's last phase.
    first_rate_bps : np.ndarray[float]
        Rate of each commodity in the first allocation after it started.
    events : int
        Number of rate recomputations.
    """

    done_ps: np.ndarray
    phase_end_ps: np.ndarray
    chain_end_ps: np.ndarray
    first_rate_bps: np.ndarray
    events: int


def _phase_order(p: FluidProblem):
    """Next phase of every phase inside its chain (-1 for the last) and first phase of chains."""
    nph = len(p.phase_chain)
    order = np.lexsort((np.arange(nph), p.phase_chain))
    nxt = np.full(nph, -1, np.int64)
    same = p.phase_chain[order[1:]] == p.phase_chain[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    first = np.full(len(p.chain_start_ps), -1, np.int64)
    is_first = np.r_[True, ~same]
    first[p.phase_chain[order[is_first]]] = order[is_first]
    return nxt, first


def run_fluid(p: FluidProblem, model: SharingModel, max_events: int = 1_000_000) -> FluidResult:
    """Run commodities to completion under ``model``; see the module docstring.

    Raises
    ------
    ValueError
        If a commodity can never move (all its paths have zero capacity).
    """
    nc, nph, nch = p.inc.num_flows, len(p.phase_chain), len(p.chain_start_ps)
    nxt, first = _phase_order(p)
    release = np.full(nph, _NEVER, np.int64)
    release[first[first >= 0]] = np.asarray(p.chain_start_ps, np.int64)[first >= 0]
    remaining_in_phase = np.bincount(p.phase, minlength=nph)
    phase_end = np.full(nph, _NEVER, np.int64)
    chain_end = np.full(nch, _NEVER, np.int64)
    rem = np.asarray(p.size_bits, np.float64).copy()
    forever = np.zeros(nc, bool) if p.persistent is None else np.asarray(p.persistent, bool)
    rem[forever] = np.inf
    done_ps = np.full(nc, _NEVER, np.int64)
    first_rate = np.full(nc, np.nan)
    started = np.zeros(nph, bool)
    live = np.zeros(nc, bool)
    t, events = 0, 0
    while True:
        # release phases due now (empty phases end at once, possibly releasing more)
        due = np.flatnonzero(~started & (release <= t))
        while len(due):
            started[due] = True
            member = np.isin(p.phase, due)
            live |= member & (rem > 0)
            nothing = member & (rem <= 0)  # zero-byte commodities are done on release
            done_ps[nothing] = t
            remaining_in_phase -= np.bincount(p.phase[nothing], minlength=nph)
            empty = due[remaining_in_phase[due] == 0]
            for ph in empty.tolist():
                _finish_phase(ph, t, p, nxt, release, phase_end, chain_end)
            due = np.flatnonzero(~started & (release <= t))
        pending = release[~started]
        t_rel = int(pending.min()) if len(pending) else _NEVER
        if not (live & ~forever).any():
            if t_rel == _NEVER:
                break
            t = t_rel
            continue
        rate = model.rates(p.inc, p.capacity_bps, live)
        events += 1
        fresh = live & np.isnan(first_rate)
        first_rate[fresh] = rate[fresh]
        with np.errstate(divide="ignore", invalid="ignore"):
            dt = np.where(live & (rate > 0), np.ceil(rem * PS_PER_S / rate), np.inf)
        if not np.isfinite(dt[live & ~forever]).any() and t_rel == _NEVER:
            raise ValueError("some flows can never finish: their paths have no capacity "
                             "(all links failed?)")
        t_done = t + int(np.min(dt[live])) if np.isfinite(dt[live]).any() else _NEVER
        t_next = min(t_done, t_rel)
        fin = live & (dt <= t_next - t)
        rem[live] -= rate[live] * ((t_next - t) / PS_PER_S)
        rem[fin] = 0.0
        done_ps[fin] = t_next
        live &= ~fin
        t = t_next
        if fin.any():
            counts = np.bincount(p.phase[fin], minlength=nph)
            remaining_in_phase -= counts
            for ph in np.flatnonzero((counts > 0) & (remaining_in_phase == 0)).tolist():
                _finish_phase(ph, t, p, nxt, release, phase_end, chain_end)
        if events > max_events:
            raise RuntimeError(f"fluid run exceeded {max_events} events")
    drop_trace(p.inc)  # the solver's record of this run's allocations (memory)
    return FluidResult(done_ps, phase_end, chain_end, first_rate, events)


def _finish_phase(ph, t, p, nxt, release, phase_end, chain_end) -> None:
    """Close a phase at time ``t``: add its latency and release the chain's next phase."""
    end = t + int(p.phase_latency_ps[ph])
    phase_end[ph] = end
    if nxt[ph] >= 0:
        release[nxt[ph]] = end
    else:
        chain_end[p.phase_chain[ph]] = end
