"""RC queue pairs and the NIC: segmentation, pacing, ACK/NACK, go-back-N, retransmit timer.

This is a mixin of :class:`netsim.packet.engine.PacketSim`; the engine owns the ports and the
event heap, this module the transport. Model (IB spec semantics, as NCCL configures them):

* A QP carries its share of a flow as ``npkts`` packets of ``mtu_bytes`` payload (the last one
  shorter), PSN 0..npkts-1. The NIC port serves its QPs round robin; each QP is paced at its
  congestion control's ``rate_bps`` and limited by ``cwnd_bytes`` of bytes in flight.
* The responder ACKs every ``ack_every_packets`` in-order packets and the last one (cumulative
  PSN), NACKs the first out-of-sequence packet once per expected PSN (go-back-N: the requester
  rewinds ``snd_nxt``), re-ACKs duplicates once, and sends a CNP for ECN-marked packets through
  the notification point's pacing (``CnpGenerator``). ACKs echo ECN and carry the send time of
  the packet that triggered them (the RTT sample).
* Local ACK timeout ``rto = 4.096 us x 2^ib_timeout``, restarted on progress. Timeout: rewind to
  the oldest unacknowledged PSN; after ``retry_cnt`` retries the next timeout puts the QP in error
  and its flow fails. With ``adaptive_retrans`` the k-th consecutive timeout waits
  ``min(rto, b x 2^(k // tries_per_step))`` with b drawn in [base, 2 base) per QP, and the QP
  errors once ``(retry_cnt + 1) x rto`` passed without progress (same budget, earlier tries:
  NVIDIA's adap_retrans profile ladder capped by the QP timeout, nccl-roce.md 5.3).
"""

from __future__ import annotations

from heapq import heappop, heappush

try:  # Cython pure-Python mode: the annotations type the hot path when compiled (setup.py)
    import cython

    COMPILED = cython.compiled
except ImportError:  # plain Python without Cython installed: annotations are never evaluated
    COMPILED = False

DATA, ACK, NACK, CNP = 0, 1, 2, 3
_PS_BITS = 8 * 10**12  # bits x ps per s: serialization ps = bytes * _PS_BITS // rate_bps


class Pkt:
    """One packet in the fabric (a small slotted record, the only per-packet object)."""

    __slots__ = ("kind", "qp", "psn", "size", "route", "hop", "ecn", "t_sent", "inl", "areq",
                 "ta", "tkey", "teid")

    def __init__(self, kind, qp, psn, size, route, ecn, t_sent):
        self.kind = kind
        self.qp = qp
        self.psn = psn
        self.size = size
        self.route = route
        self.hop = 0
        self.ecn = ecn
        self.t_sent = t_sent
        self.inl = -1
        self.areq = False  # BTH AckReq: the requester's window closed, ACK at once
        # compiled build: the arrival time and heap key while it is on a link's wire
        self.ta = self.tkey = self.teid = 0


class QP:
    """Requester and responder state of one RC queue pair (both ends in one record)."""

    __slots__ = ("idx", "flow", "nic", "port", "rport", "fwd", "rev", "npkts", "last_payload",
                 "snd_nxt", "snd_una", "max_sent", "cc", "next_ok", "deadline", "timer_on",
                 "retries", "progress_t", "adapt_base", "error", "done", "rx_next", "rx_unacked",
                 "rx_ecn", "rx_nacked", "rx_dup_acked", "rx_done_ps", "tx_done_ps", "retx_pkts",
                 "retx_bytes", "timeouts", "payload_bytes", "sport", "ctrl_lat", "last_tx",
                 "last_wire")

    def __init__(self, idx, flow, nic, fwd, rev, payload_bytes, mtu, sport):
        self.idx = idx
        self.flow = flow
        self.nic = nic
        self.fwd = fwd
        self.rev = rev
        self.port = fwd[0]
        self.rport = rev[0]
        self.sport = sport
        self.payload_bytes = payload_bytes
        self.npkts = max(1, -(-payload_bytes // mtu))
        self.last_payload = payload_bytes - (self.npkts - 1) * mtu
        self.snd_nxt = self.snd_una = self.max_sent = 0
        self.cc = None
        self.next_ok = 0
        self.deadline = -1
        self.timer_on = False
        self.retries = 0
        self.progress_t = 0
        self.adapt_base = 0
        self.error = self.done = False
        self.rx_next = self.rx_unacked = 0
        self.rx_ecn = self.rx_nacked = self.rx_dup_acked = False
        self.rx_done_ps = self.tx_done_ps = -1
        self.retx_pkts = self.retx_bytes = self.timeouts = 0
        self.ctrl_lat = 0
        self.last_tx = self.last_wire = 0


class RcTransport:
    """Mixin: NIC data source, responder and requester logic of :class:`PacketSim`."""

    # ---------------------------------------------------------------- requester (sender) side
    def _repace(self, t, qp):
        """The CC changed *qp*'s rate outside a send: recompute its next departure."""
        if qp.done or qp.error or qp.last_wire == 0:
            return
        nxt = qp.last_tx + int(qp.last_wire * _PS_BITS / qp.cc.rate_bps)
        if nxt < t:
            nxt = t
        old = qp.next_ok
        qp.next_ok = nxt
        if nxt < old and qp.snd_nxt < qp.npkts:
            self._kick(qp.port, nxt if nxt > self.P_busy[qp.port] else self.P_busy[qp.port])

    def _rto_for(self, qp):
        """Timeout for the next wait of *qp* (the adaptive ladder, or the fixed IB timeout)."""
        if not self.adaptive:
            return self.rto
        step = qp.adapt_base << (qp.retries // self.adapt_tries)
        return step if step < self.rto else self.rto

    def _timer(self, t, qp, _):
        """Retransmit timer of *qp* fired (lazy: the deadline may have moved on since)."""
        qp.timer_on = False
        if qp.done or qp.error or qp.deadline < 0:
            return
        if qp.snd_una >= qp.snd_nxt:
            qp.deadline = -1  # nothing outstanding (paused or paced): the IB timer is idle
            return
        if t < qp.deadline:
            qp.timer_on = True
            heappush(self.q, (qp.deadline, next(self.eid), self._timer, qp, None))
            heappush(self.P_due[qp.port], qp.deadline)
            return
        qp.retries += 1
        qp.timeouts += 1
        self.timeouts += 1
        if self.adaptive:
            failed = t - qp.progress_t >= (self.retry_cnt + 1) * self.rto
        else:
            failed = qp.retries > self.retry_cnt
        if failed:
            self._qp_error(t, qp)
            return
        qp.snd_nxt = qp.snd_una  # go-back-N from the oldest unacknowledged packet
        qp.cc.on_timeout()
        wait = self._rto_for(qp)
        if self.adaptive:
            wait = min(wait, qp.progress_t + (self.retry_cnt + 1) * self.rto - t)
        qp.deadline = t + max(1, wait)
        qp.timer_on = True
        heappush(self.q, (qp.deadline, next(self.eid), self._timer, qp, None))
        heappush(self.P_due[qp.port], qp.deadline)
        self._port_ready(t, qp.port)

    def _qp_error(self, t, qp):
        """Retries exhausted: the QP goes to the error state (IBV_WC_RETRY_EXC_ERR)."""
        qp.error = True
        qp.deadline = -1
        self.nic_active[qp.nic].remove(qp)
        self._qp_finished(t)

    def _ctrl_arrive(self, t, rev, pkt):
        up = self.L_up
        for lid in rev:
            if not up[lid]:
                return  # lost on a down link of the reverse path
        self._rx_ctrl(t, pkt)

    def _port_ready(self, t, lk):
        """Something became sendable on port *lk*: serve it now or when it is free."""
        busy = self.P_busy[lk]
        if busy <= t:
            self._serve(t, lk)
        else:
            self._kick(lk, busy)


class _Nic:
    """What the NIC's per-packet functions read (see :func:`nic_path`): the simulator's port
    arrays and settings and the engine's *tx*, *kick* and *serve*, gathered once per run.
    The compiled build declares it an extension type (``qp.pxd``); counters stay on *sim*."""

    def __init__(self, sim, tx, kick, serve):
        self.sim = sim
        self.tx, self.kick, self.serve = tx, kick, serve
        self.nic_active = sim.nic_active
        self.L_nic = sim.L_nic
        self.P_busy = sim.P_busy
        self.P_commit = sim.P_commit
        self.P_pause_eff = sim.P_pause_eff
        self.nic_rr = sim.nic_rr
        self.P_ctrl = sim.P_ctrl
        self.L_rev = sim.L_rev
        self.L_fly = sim.L_fly
        self.cheap = sim.hq is not None
        self.P_due = sim.P_due
        self.P_ctrl_min = sim.P_ctrl_min
        self.P_rxgap = [(sim.L_prop[r] + sim.ctrl_size * _PS_BITS // sim.L_rate[r]) if r >= 0
                        else 0 for r in sim.L_rev]
        self.mtu = sim.mtu
        self.hdr = sim.hdr
        self.rto = sim.rto
        self.q = sim.q
        self.eid, self.rto_for, self.env = sim.eid, sim._rto_for, sim.env
        self.cnp_gen = sim.cnp_gen
        self.flow_dlv = sim.flow_dlv
        self.ack_every = sim.ack_every
        self.ctrl_size = sim.ctrl_size
        self.ctrl_per_hop = sim.ctrl_per_hop
        self.ack_qp = sim.ack_qp
        self.cnp_prio = sim.cnp_prio
        self.ctrl_arrive = sim._ctrl_arrive


def _nic_send(n: _Nic, t: cython.longlong, lk: cython.Py_ssize_t):
    """The NIC port *lk* is free at *t*: commit data packets of eligible QPs up to
    ``commit_ps`` ahead (:func:`_commit_limit`)."""
    qps: list = n.nic_active[n.L_nic[lk]]
    s: cython.longlong = t
    limit: cython.longlong = _commit_limit(n, t, lk)
    nxt: cython.longlong
    busy: cython.longlong
    while qps:
        nxt = _nic_one(n, s, lk, qps)
        if nxt < 0:
            return  # nothing sendable until an ACK or a timer
        # Paced departures are computed, not waited for: commit the next packet at the
        # time it may go if that is inside the window, else come back then.
        busy = n.P_busy[lk]
        s = nxt if nxt > busy else busy
        if s >= limit:
            n.kick(lk, s)
            return


def _commit_limit(n: _Nic, t: cython.longlong, lk: cython.Py_ssize_t) -> cython.longlong:
    """How far ahead of *t* the NIC port *lk* may commit packets: up to ``commit_ps``, and
    never past an event that could change what it sends."""
    # Never past the PFC response delay: a PAUSE arriving after t takes effect no earlier
    # than limit, so committing ahead changes nothing; one that already arrived stops it.
    v: cython.longlong = n.P_commit[lk]
    limit: cython.longlong = t + v
    v = n.P_pause_eff[lk]
    if v < limit:
        limit = v
    # Never past the next data arrival at this NIC: its ACK/NAK leaves on this port at the
    # next packet boundary, as it would without committing ahead.
    rin: cython.Py_ssize_t = n.L_rev[lk]
    if rin >= 0:
        fly = n.L_fly[rin]
        if fly:  # compiled build: packets (their arrival time in .ta); plain: heap tuples
            v = fly[0].ta if n.cheap else fly[0][0]
            if v < limit:
                limit = v
        v = n.P_rxgap[lk]
        if t + v < limit:
            limit = t + v
    # Nor past anything else due at this NIC that can change what it sends: a CNP (or an
    # ACK in the priority class) on its way back, a congestion-control or retransmit
    # timer of one of its QPs, a flow start, a link state or route change.
    due: list = n.P_due[lk]
    while due and due[0] < t:  # one due now may not have run yet: it still binds
        heappop(due)
    if due:
        v = due[0]
        if v < limit:
            limit = v
    v = n.P_ctrl_min[lk]
    if t + v < limit:
        limit = t + v  # a CNP not sent yet cannot come back sooner
    return limit


def _window_full(qp: QP, mtu: cython.longlong) -> cython.bint:
    """True when *qp*'s congestion window (if it has one) holds no more bytes in flight."""
    cw = qp.cc.cwnd_bytes
    return cw is not None and (qp.snd_nxt - qp.snd_una) * mtu >= cw


def _soonest(qps: list, mtu: cython.longlong) -> cython.longlong:
    """The earliest time one of *qps* with data to send and an open window may send
    (-1: none)."""
    q2: QP
    nxt: cython.longlong = -1
    for q2 in qps:
        if q2.snd_nxt < q2.npkts:
            if _window_full(q2, mtu):
                continue
            if nxt < 0 or q2.next_ok < nxt:
                nxt = q2.next_ok
    return nxt


def _pick(n: _Nic, t: cython.longlong, lk: cython.Py_ssize_t, qps: list):
    """The next QP of port *lk* (round robin) that may send at *t*, or None."""
    qp: QP
    k: cython.Py_ssize_t = len(qps)
    rr: cython.Py_ssize_t = n.nic_rr[lk]
    start: cython.Py_ssize_t = rr % k
    j: cython.Py_ssize_t
    for j in range(k):
        qp = qps[(start + j) % k]
        if qp.snd_nxt >= qp.npkts or _window_full(qp, n.mtu) or qp.next_ok > t:
            continue
        n.nic_rr[lk] = start + j + 1
        return qp
    return None


def _nic_one(n: _Nic, t: cython.longlong, lk: cython.Py_ssize_t, qps: list) -> cython.longlong:
    """Send one packet at *t* if a QP may; return when the next one may go (-1: none)."""
    chosen = _pick(n, t, lk, qps)
    if chosen is None:  # every QP with data and window waits for its pacing
        return _soonest(qps, n.mtu)
    qp: QP = chosen
    pkt: Pkt = _data_pkt(n, t, lk, qp)
    busy: cython.longlong = n.tx(t, lk, pkt)
    if len(qps) == 1:
        if qp.snd_nxt >= qp.npkts or pkt.areq:
            return -1
        return qp.next_ok if qp.next_ok > busy else busy
    nxt: cython.longlong = _soonest(qps, n.mtu)
    if nxt < 0:
        return -1
    return nxt if nxt > busy else busy


def _data_pkt(n: _Nic, t: cython.longlong, lk: cython.Py_ssize_t, qp: QP) -> Pkt:
    """*qp*'s next data packet, leaving port *lk* at *t*: counted, timed (retransmit timer)
    and paced."""
    psn: cython.longlong = qp.snd_nxt
    payload: cython.longlong = n.mtu if psn < qp.npkts - 1 else qp.last_payload
    size: cython.longlong = payload + n.hdr
    pkt: Pkt = Pkt(DATA, qp, psn, size, qp.fwd, 0, t)
    qp.snd_nxt = psn + 1
    sim = n.sim
    sim.inj_pkts += 1
    sim.inj_bytes += payload
    if psn < qp.max_sent:
        qp.retx_pkts += 1
        qp.retx_bytes += payload
    else:
        qp.max_sent = psn + 1
    if qp.deadline < 0 and n.rto is not None:
        qp.deadline = t + n.rto_for(qp)
        if not qp.timer_on:
            qp.timer_on = True
            heappush(n.q, (qp.deadline, next(n.eid), sim._timer, qp, None))
            heappush(n.P_due[lk], qp.deadline)
    _pace(n, t, qp, size)
    if _window_full(qp, n.mtu):
        pkt.areq = True  # the window just closed: ask for an ACK (IB BTH AckReq)
    return pkt


def _pace(n: _Nic, t: cython.longlong, qp: QP, size: cython.longlong):
    """*qp* sends *size* bytes at *t*: its congestion control sees them, and its next packet
    may leave one wire time at its rate later."""
    cc = qp.cc
    env = n.env
    now = env._now
    env._now = t  # the congestion control sees the packet's own departure time
    cc.on_send(size)
    env._now = now
    qp.last_tx = t
    qp.last_wire = size
    wire: object = size  # pacing: a float division, as in Python
    qp.next_ok = t + int(wire * _PS_BITS / cc.rate_bps)


def _rx_data(n: _Nic, t: cython.longlong, pkt: Pkt):
    """A data packet reached the responder NIC."""
    qp: QP = pkt.qp
    psn: cython.longlong = pkt.psn
    sim = n.sim
    if pkt.ecn and n.cnp_gen is not None and n.cnp_gen.should_send(qp.idx, t):
        _send_ctrl(n, t, qp, CNP, 0, 0, t)
        sim.cnps_tx += 1
    if psn == qp.rx_next:
        _rx_in_order(n, t, qp, pkt)
        return
    sim.disc_pkts += 1
    if psn > qp.rx_next:
        if not qp.rx_nacked:
            qp.rx_nacked = True
            _send_ctrl(n, t, qp, NACK, qp.rx_next, pkt.ecn, pkt.t_sent)
    elif not qp.rx_dup_acked:
        qp.rx_dup_acked = True
        _send_ctrl(n, t, qp, ACK, qp.rx_next, pkt.ecn, pkt.t_sent)


def _rx_in_order(n: _Nic, t: cython.longlong, qp: QP, pkt: Pkt):
    """*pkt* is the PSN *qp*'s responder expects: deliver it, ACK when due."""
    sim = n.sim
    sim.dlv_pkts += 1
    payload: cython.longlong = pkt.size - n.hdr
    sim.dlv_bytes += payload
    n.flow_dlv[qp.flow] += payload
    qp.rx_next = pkt.psn + 1
    qp.rx_nacked = qp.rx_dup_acked = False
    if pkt.ecn:
        qp.rx_ecn = True
    qp.rx_unacked += 1
    last: cython.bint = qp.rx_next == qp.npkts
    if last:
        qp.rx_done_ps = t
    if last or qp.rx_unacked >= n.ack_every or pkt.areq:
        _send_ctrl(n, t, qp, ACK, qp.rx_next, qp.rx_ecn, pkt.t_sent)
        qp.rx_unacked = 0
        qp.rx_ecn = False


def _send_ctrl(n: _Nic, t: cython.longlong, qp: QP, kind: cython.int, psn, ecn, t_sent):
    """Send an ACK / NACK (the QP's class, hop by hop) or a CNP (its own strict-priority
    class) back to the requester."""
    pkt: Pkt = Pkt(kind, qp, psn, n.ctrl_size, qp.rev, ecn, t_sent)
    n.sim.ctrl_pkts += 1
    if not n.ctrl_per_hop and (not n.ack_qp or (kind == CNP and n.cnp_prio)):
        # Strict priority and never paused: propagation + serialization of the reverse path.
        heappush(n.q, (t + qp.ctrl_lat, next(n.eid), n.ctrl_arrive, qp.rev, pkt))
        heappush(n.P_due[qp.port], t + qp.ctrl_lat)
        return
    lk: cython.Py_ssize_t = qp.rport
    n.P_ctrl[lk].append(pkt)
    busy: cython.longlong = n.P_busy[lk]
    if busy <= t:
        n.serve(t, lk)
    else:
        n.kick(lk, busy)


def _rx_ctrl(n: _Nic, t: cython.longlong, pkt: Pkt):
    """An ACK, NACK or CNP reached the requester."""
    qp: QP = pkt.qp
    kind: cython.int = pkt.kind
    sim = n.sim
    if kind == CNP:
        sim.cnps_rx += 1
        if not (qp.done or qp.error):
            qp.cc.on_cnp()
            sim._repace(t, qp)
        return
    if qp.done or qp.error:
        return
    psn: cython.longlong = pkt.psn
    if psn > qp.snd_una:
        _acked(n, t, qp, pkt, psn)
        if qp.done:
            return
    elif kind == ACK:
        qp.cc.on_ack(0, t - pkt.t_sent, bool(pkt.ecn))
    if kind == NACK and qp.snd_nxt > psn:
        qp.snd_nxt = psn  # go-back-N
        sim.nacks_rx += 1
        on_nack = getattr(qp.cc, "on_nack", None)
        if on_nack is not None:
            on_nack()
    lk: cython.Py_ssize_t = qp.port
    busy: cython.longlong = n.P_busy[lk]
    if busy <= t:  # something may have become sendable: serve the port now or when free
        n.serve(t, lk)
    else:
        n.kick(lk, busy)


def _acked(n: _Nic, t: cython.longlong, qp: QP, pkt: Pkt, psn: cython.longlong):
    """*pkt* (ACK or NACK) acknowledges every PSN below *psn*, which is new progress."""
    mtu: cython.longlong = n.mtu
    acked: cython.longlong = (psn - qp.snd_una) * mtu
    if psn == qp.npkts:
        acked -= mtu - qp.last_payload
    qp.snd_una = psn
    if qp.snd_nxt < psn:
        qp.snd_nxt = psn
    qp.retries = 0
    qp.progress_t = t
    qp.cc.on_ack(acked, t - pkt.t_sent, bool(pkt.ecn))
    if psn >= qp.npkts:
        qp.done = True
        qp.tx_done_ps = t
        qp.deadline = -1
        n.nic_active[qp.nic].remove(qp)
        n.sim._qp_finished(t)
        return
    if n.rto is not None and qp.snd_nxt > psn:
        qp.deadline = t + n.rto_for(qp)
    else:
        qp.deadline = -1


def nic_path(sim, tx, kick, serve) -> dict:
    """The NIC of *sim*: the data source (``_nic_send``, ``_nic_one``) and the responder
    (``_rx_data``, ``_send_ctrl``), as closures over its arrays (:class:`_Nic`) that hand
    each call to the helpers above, sending with the engine's *tx*, *serve* and *kick* (see
    ``engine._hot_path``). Counters stay on *sim*.

    The annotations type the helpers for the compiled build (as in ``engine._hot_path``);
    the pacing arithmetic that mixes floats stays in Python objects, as in the plain path."""
    n: _Nic = _Nic(sim, tx, kick, serve)

    def nic_send(t: cython.longlong, lk: cython.Py_ssize_t):
        _nic_send(n, t, lk)

    def nic_one(t: cython.longlong, lk: cython.Py_ssize_t, qps: list):
        return _nic_one(n, t, lk, qps)

    def rx_data(t: cython.longlong, pkt: Pkt):
        _rx_data(n, t, pkt)

    def send_ctrl(t: cython.longlong, qp: QP, kind: cython.int, psn, ecn, t_sent):
        _send_ctrl(n, t, qp, kind, psn, ecn, t_sent)

    def rx_ctrl(t: cython.longlong, pkt: Pkt):
        _rx_ctrl(n, t, pkt)

    return {"_nic_send": nic_send, "_nic_one": nic_one, "_rx_data": rx_data,
            "_send_ctrl": send_ctrl, "_rx_ctrl": rx_ctrl}
