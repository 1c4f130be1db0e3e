"""The 1F1B pipeline schedule (plain and interleaved) and its list-scheduling execution.

Orders follow Megatron-LM's ``schedules.py``: plain 1F1B (PipeDream-Flush) runs
``p - s - 1`` warm-up forwards on stage ``s``; the interleaved schedule runs
``2 (p - s - 1) + (v - 1) p`` warm-up forwards over ``m v`` chunk-forwards, chunk of the k-th
forward ``(k mod p v) // p`` (the backward runs chunks in reverse). Closed forms for uniform
stages without communication (Narayanan et al. 2021 section 2.2): makespan
``(m + p - 1)(t_f + t_b)`` plain, ``(m + (p - 1)/v)(t_f + t_b)`` interleaved, with per-stage
``t_f, t_b`` the whole-stage times.

Virtual stage ``q = c p + s`` is chunk ``c`` of stage ``s``; micro-batch data flows
``q -> q + 1`` forward and back. An op starts when its stage is free and its input is there;
with blocking sends (Megatron's default) the sender is also busy for the transfer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FWD, BWD = 0, 1


def stage_order(s: int, p: int, m: int, v: int) -> list[tuple[int, int, int]]:
    """Ops of stage ``s`` in execution order: ``(FWD|BWD, micro_batch, chunk)``."""
    total = m * v
    if v == 1:
        warmup = min(p - s - 1, m)
    elif m == p:
        warmup = total  # Megatron: all forwards first when m == p
    else:
        warmup = min(2 * (p - s - 1) + (v - 1) * p, total)

    def op(k: int, kind: int) -> tuple[int, int, int]:
        k_in = k % (p * v)
        chunk = k_in // p
        if kind == BWD:
            chunk = v - 1 - chunk
        return (kind, (k // (p * v)) * p + k_in % p, chunk)

    if v == 1:
        op = lambda k, kind: (kind, k, 0)  # noqa: E731  (plain 1F1B: chunk 0 only)
    order = [op(k, FWD) for k in range(warmup)]
    for i in range(total - warmup):
        order += [op(warmup + i, FWD), op(i, BWD)]
    order += [op(k, BWD) for k in range(total - warmup, total)]
    return order


@dataclass(frozen=True, slots=True)
class PipelineRun:
    """Result of executing one iteration's pipeline."""

    makespan_s: float
    """Time at which the last backward op ends."""
    stage_busy_s: np.ndarray
    """(p,) time each stage spends computing (and blocked in sends)."""
    stage_end_s: np.ndarray
    """(p,) end of each stage's last op."""
    chunk_last_bwd_s: np.ndarray
    """(p, v, 2): start and end of the last backward op of every chunk."""
    critical_path: list[dict]
    """Ops on the path that ends last, in time order."""


def simulate_pipeline(fwd_s: np.ndarray, bwd_s: np.ndarray, p2p_s: np.ndarray, m: int,
                      p: int, v: int, blocking_send: bool = True) -> PipelineRun:
    """Execute the schedule.

    Parameters
    ----------
    fwd_s, bwd_s : (p * v,) arrays
        Duration of one micro-batch's forward / backward on virtual stage ``q``, seconds.
    p2p_s : (p * v,) array
        Transfer time from virtual stage ``q`` to ``q + 1`` (and back), seconds; the last entry
        is unused.
    m, p, v : int
        Micro-batches, pipeline stages, virtual stages per stage.
    blocking_send : bool
        The sending stage waits for its transfer to finish (Megatron's default).
    """
    nq = p * v
    orders = [stage_order(s, p, m, v) for s in range(p)]
    done = np.full((2, m, nq), np.nan)  # end time of every op
    why: dict[tuple[int, int, int], tuple] = {}
    ptr, free = [0] * p, np.zeros(p)
    busy = np.zeros(p)
    last_key: list[tuple | None] = [None] * p
    last_b = np.zeros((p, v, 2))
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while ptr[s] < len(orders[s]):
                kind, mb, c = orders[s][ptr[s]]
                q = c * p + s
                ready, dep = _ready(kind, mb, q, nq, p, done, p2p_s)
                if ready is None:
                    break
                start = max(free[s], ready)
                dur = fwd_s[q] if kind == FWD else bwd_s[q]
                end = start + dur
                done[kind, mb, q] = end
                send = _send_s(kind, q, nq, p, p2p_s) if blocking_send else 0.0
                # the op was held up by its input, or by the previous op on its stage
                why[(kind, mb, q)] = (start, end, dep if ready >= free[s] else last_key[s])
                last_key[s] = (kind, mb, q)
                free[s] = end + send
                busy[s] += dur + send
                if kind == BWD:
                    last_b[s, c] = (start, end)
                ptr[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("pipeline schedule deadlocked (inconsistent orders)")
    ends = np.array([done[BWD][:, [c * p + s for c in range(v)]].max() for s in range(p)])
    return PipelineRun(makespan_s=float(ends.max()), stage_busy_s=busy, stage_end_s=ends,
                       chunk_last_bwd_s=last_b, critical_path=_trace_back(why, done, p))


def _ready(kind: int, mb: int, q: int, nq: int, p: int, done: np.ndarray,
           p2p_s: np.ndarray) -> tuple[float | None, tuple | None]:
    """Time the input of op (kind, mb, q) is available, and the op it waits for."""
    if kind == FWD:
        if q == 0:
            return 0.0, None
        dep = (FWD, mb, q - 1)
    elif q == nq - 1:
        dep = (FWD, mb, q)
    else:
        dep = (BWD, mb, q + 1)
    t = done[dep]
    if np.isnan(t):
        return None, None
    hop = dep[2] != q and p > 1  # data crosses to another stage
    return float(t + (p2p_s[min(q, dep[2])] if hop else 0.0)), dep


def _send_s(kind: int, q: int, nq: int, p: int, p2p_s: np.ndarray) -> float:
    """Transfer the op at virtual stage ``q`` sends on (0 when the consumer is local)."""
    if p == 1:
        return 0.0
    if kind == FWD:
        return float(p2p_s[q]) if q < nq - 1 else 0.0
    return float(p2p_s[q - 1]) if q > 0 else 0.0


def _trace_back(why: dict, done: np.ndarray, p: int) -> list[dict]:
    """Walk from the op that ends last back through whatever delayed each op."""
    flat = np.nanargmax(done[BWD])
    mb, q = np.unravel_index(flat, done[BWD].shape)
    key, path = (BWD, int(mb), int(q)), []
    while key is not None:
        start, end, dep = why[key]
        path.append({"op": "forward" if key[0] == FWD else "backward", "microbatch": key[1],
                     "stage": key[2] % p, "chunk": key[2] // p, "start_s": start, "end_s": end})
        key = dep
    return path[::-1]
