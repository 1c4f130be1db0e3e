"""One validator for every engine: conservation of bytes/packets and link capacity.

Both functions raise ``AssertionError`` with a message that names the broken quantity, so tests
of the packet engine, the flow engine and the collectives call the same checks (the habit of
networkx's ``validate_flows``, style-anchors.md section 2).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from topologies.units import PS_PER_S


def check_conservation(ledger: Mapping[str, int], *, tol: int = 0) -> None:
    """Check ``injected == delivered + dropped + discarded + in_flight`` in a ledger.

    Parameters
    ----------
    ledger : counts (packets or bytes, one unit throughout) with keys ``injected`` (every
        transmission, retransmissions included), ``delivered`` (accepted by receivers),
        ``dropped`` (lost in the network: overflow, headroom, down links), and optionally
        ``discarded`` (reached the receiver but refused: out of sequence / duplicate),
        ``in_flight`` (still in the network when the run stopped), ``retransmitted``
        (the part of ``injected`` that repeats earlier data) and ``unique`` (first
        transmissions); when both of the last two are present, ``injected == unique +
        retransmitted`` is checked too.
    tol : allowed absolute mismatch.
    """
    for key in ("injected", "delivered", "dropped"):
        if key not in ledger:
            raise AssertionError(f"conservation ledger lacks {key!r}: got keys {sorted(ledger)}")
        if ledger[key] < 0:
            raise AssertionError(f"conservation ledger {key}={ledger[key]} is negative")
    out = (ledger["delivered"] + ledger["dropped"] + ledger.get("discarded", 0)
           + ledger.get("in_flight", 0))
    if abs(ledger["injected"] - out) > tol:
        raise AssertionError(
            f"not conserved: injected {ledger['injected']} != delivered {ledger['delivered']} + "
            f"dropped {ledger['dropped']} + discarded {ledger.get('discarded', 0)} + in flight "
            f"{ledger.get('in_flight', 0)} (= {out})")
    if "retransmitted" in ledger and "unique" in ledger:
        if abs(ledger["injected"] - ledger["unique"] - ledger["retransmitted"]) > tol:
            raise AssertionError(
                f"retransmissions not separated: injected {ledger['injected']} != unique "
                f"{ledger['unique']} + retransmitted {ledger['retransmitted']}")


def check_capacity(link_bytes, capacity_bps, duration_ps: int, *, slack_bytes=0) -> None:
    """Check that no link carried more than ``capacity x duration`` (plus *slack_bytes*).

    Parameters
    ----------
    link_bytes : bytes each directed link carried (array-like).
    capacity_bps : capacity of each link (same shape).
    duration_ps : the time window the bytes were carried in.
    slack_bytes : allowance per link (e.g. one packet straddling the window edge).
    """
    b = np.asarray(link_bytes, dtype=float)
    cap = np.asarray(capacity_bps, dtype=float) * duration_ps / (8 * PS_PER_S)
    over = np.nonzero(b > cap + np.asarray(slack_bytes, dtype=float))[0]
    if over.size:
        i = int(over[0])
        raise AssertionError(f"link {i} carried {b[i]:.0f} B > capacity {cap[i]:.0f} B in "
                             f"{duration_ps} ps ({over.size} links over)")
