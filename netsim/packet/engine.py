"""The packet engine: ports, switches (shared buffer, ECN, PFC), links with flaps, event loop.

Model (details and sources in ``docs/packet-engine.md`` and :mod:`netsim.packet.config`):

* Every directed link ``lk`` is one egress port at its tail node with two classes: a strict
  high-priority class for ACK/NACK/CNP and the lossless RoCE class for data. A packet of
  ``s`` bytes takes ``s x 8 / rate`` to serialize, then the link's propagation delay;
  store-and-forward at each switch.
* A switch charges a data packet to its shared buffer and to the ingress queue it came in on
  until it leaves the egress queue. PFC: when an ingress queue passes the XOFF threshold
  (dynamic ``alpha x free buffer`` or static), a PAUSE reaches the upstream egress port one
  propagation delay later and stops its data class; RESUME when the queue is
  ``pfc_xon_offset_bytes`` below the threshold. Bytes arriving while paused go to headroom;
  beyond it (or a full buffer, or PFC off and the egress above the dynamic threshold) the
  packet is dropped. Pause propagation and head-of-line blocking are not scripted: a paused
  egress simply stops, its queue grows and pauses its own upstream.
* ECN: RED on the egress data queue at enqueue (Kmin, Kmax, Pmax).
* A link that is down loses every packet sent on it or in flight on it.

Speed: the hot path is plain callbacks on simpy's heap (``Environment._queue``), entries
``(t_ps, eid, fn, a, b)`` run by :meth:`PacketSim.run`; a port's next service is one
lazy wake event; pacing is by computed departure times. simpy events (processes, timeouts) on
the same environment still run through their callbacks. ``setup.py`` compiles this module and
``qp.py`` with Cython when it can (the same code, typed by the annotations and ``engine.pxd``;
``netsim/packet/build_mode.py``, ``docs/packet-engine.md``): identical results, faster.
"""

from __future__ import annotations

import gc
from array import array
from collections import deque
from heapq import heappop, heappush

import simpy

try:  # Cython pure-Python mode: the annotations type the hot path when compiled (setup.py)
    import cython

    COMPILED = cython.compiled
except ImportError:  # plain Python without Cython installed: annotations are never evaluated
    COMPILED = False

from netsim.packet.qp import CNP, DATA, Pkt, RcTransport, nic_path
from netsim.packet.simpy_event import fire as fire_simpy

if COMPILED:  # the compiled build's own event heap for the hot path (netsim/packet/_cheap.pyx)
    import netsim.packet._cheap as _cheap

_TIE_MUL = 0x9E3779B97F4A7C15  # Fibonacci hashing of the arrival time (tie arbitration)
_PS_BITS = 8 * 10**12
_NEVER = 1 << 62


def _ints(values):
    """A table of integers indexed by port or link: a list, or in the compiled build a C array
    of int64 (``array('q')``, the same values) that the hot path reads without boxing."""
    return array("q", values) if COMPILED else list(values)


class _Done(Exception):
    """Every QP finished or failed: leave the event loop."""


class _Clock:
    """The ``Clock`` the congestion-control algorithms see (netsim/cc/base.py)."""

    __slots__ = ("_sim",)

    def __init__(self, sim):
        self._sim = sim

    @property
    def now_ps(self) -> int:
        return self._sim.env._now

    def call_at(self, t_ps: int, fn) -> None:
        sim = self._sim
        heappush(sim.q, (max(int(t_ps), sim.env._now), next(sim.eid), _call0, fn, None))


def _uniform_blocks(rng):
    """Uniform draws from *rng*, fetched in blocks of 4096 (one numpy call per block)."""
    while True:
        yield from rng.random(4096).tolist()


def _call0(t, fn, _):
    fn()


class _QpClock:
    """The clock one QP's congestion control gets: after each of its timer callbacks the
    engine recomputes the QP's pending departure from the new rate (a rate raised by
    DCQCN's timer applies to the packet waiting for it, as in the NIC's rate limiter)."""

    __slots__ = ("_sim", "_qp")

    def __init__(self, sim, qp):
        self._sim = sim
        self._qp = qp

    @property
    def now_ps(self) -> int:
        return self._sim.env._now

    def call_at(self, t_ps: int, fn) -> None:
        sim = self._sim
        t = max(int(t_ps), sim.env._now)
        heappush(sim.q, (t, next(sim.eid), sim._cc_timer, fn, self._qp))
        heappush(sim.P_due[self._qp.port], t)  # the QP's NIC commits no packet past it


class PacketSim(RcTransport):
    """State of one packet-level simulation. Build with :func:`netsim.packet.simulate_packets`."""

    def __init__(self, link_src, link_dst, link_rate_bps, link_prop_ps, link_nic, reverse_link, config, rng):
        cfg = config
        self.cfg = cfg
        self.env = simpy.Environment()
        self.q = self.env._queue
        self.eid = self.env._eid
        # Our heap entries are (t, eid, fn, a, b); simpy's are (t, priority, eid, event) with
        # priority 0 or 1. Starting our ids at 2 keeps the second fields distinct, so the
        # comparison never reaches a function object and simpy's events sort first at a tie.
        next(self.eid), next(self.eid)
        self.clock = _Clock(self)
        n = len(link_dst)
        self.L_src = list(link_src)
        self.L_dst = _ints(link_dst)
        self.L_rate = _ints(int(r) for r in link_rate_bps)
        self.L_prop = _ints(int(p) for p in link_prop_ps)
        self.L_nic = _ints(link_nic)
        self.L_rev = _ints(reverse_link)
        self.L_up = [True] * n
        # Packets in flight on each link, in arrival order (a link serializes, so its arrivals
        # are in time order): only the first of each link is on the event heap, the others
        # wait here. The heap stays as small as the number of busy links instead of the
        # number of packets in flight; the order events run in is the same.
        self.L_fly = [deque() for _ in range(n)]
        self.P_busy = _ints([0] * n)
        self.P_wake = _ints([-1] * n)
        self.P_ctrl = [deque() for _ in range(n)]
        self.P_data = [deque() for _ in range(n)]
        self.P_qb = _ints([0] * n)
        self.P_qmax = _ints([0] * n)
        self.P_paused = [False] * n
        self.P_pause_t0 = [0] * n
        self.P_paused_ps = [0] * n
        self.P_pause_rx = [0] * n
        self.P_txb = _ints([0] * n)
        self.P_ecn = _ints([0] * n)
        self.P_drop = [0] * n
        self.I_bytes = _ints([0] * n)
        self.I_xoff = [False] * n
        self.I_level = _ints([0] * n)
        self.I_pause_tx = [0] * n
        self.I_hr_max = _ints([0] * n)
        self.nic_rr = _ints([0] * n)
        self.P_commit = [0] * n  # filled by the builder
        # Per NIC port: times of pending events that can change what the NIC sends (heaps;
        # the commit window stops short of the first) and the shortest way back of a CNP.
        self.P_due: list[list[int]] = [[] for _ in range(n)]
        self.P_ctrl_min = _ints([_NEVER] * n)
        self.paused_set: set[int] = set()
        self.S_used = _ints([0] * (max(link_dst) + 1 if n else 1))
        self.mtu = cfg.mtu_bytes
        self.hdr = cfg.header_bytes + cfg.wire_gap_bytes
        self.ctrl_size = cfg.ctrl_bytes + cfg.wire_gap_bytes
        self.ack_every = cfg.ack_every_packets
        self.commit_ps = cfg.commit_ps
        self.ctrl_per_hop = cfg.ctrl_per_hop
        self.rto = cfg.rto_ps
        self.retry_cnt = cfg.retry_cnt
        self.adaptive = cfg.adaptive_retrans
        self.adapt_tries = cfg.adaptive_tries_per_step
        self.pfc = cfg.pfc
        self.buffer = cfg.buffer_bytes
        self.alpha = cfg.pfc_alpha
        self.xoff_static = cfg.pfc_xoff_bytes
        self.xon_off = cfg.pfc_xon_offset_bytes
        self.headroom = [0] * n  # filled by the builder
        # 802.1Qbb timing per port (filled by the builder): the peer response delay of the
        # port's tail when a PAUSE reaches it, and the pause time one PAUSE frame carries.
        self.P_resp = [0] * n
        self.P_ptime = [0] * n
        self.P_pause_eff = _ints([_NEVER] * n)  # a PAUSE arrived and takes effect then
        self.P_pause_until = [-1] * n  # the pause in effect expires then unless refreshed
        self.P_pause_since = [-1] * n  # paused continuously since (the watchdog's clock)
        self.P_wd_until = [-1] * n  # the PFC watchdog ignores PAUSE on this port until then
        self.I_gen = [0] * n  # bumped on every XOFF / XON of an ingress (cancels refreshes)
        self.N_xoff: list[set] = [set() for _ in range(len(self.S_used))]
        self.refresh = cfg.pfc_refresh
        self.detect_ps = cfg.link_detect_ps
        self.reroute = None  # build: reroute(t, dead_links) moves QPs onto live ECMP members
        self.route_updates = 0
        self.watchdog_ps = cfg.pfc_watchdog_ps
        self.fast = cfg.fast_path
        self.ecn_deq = cfg.ecn_mark_at == "dequeue"
        self.ack_qp = cfg.ack_class == "qp"
        self.cnp_prio = cfg.cnp_class == "priority"  # "qp": CNPs queue with data, as the ACKs
        self.drop_ctrl = 0  # ACK/NAKs dropped (in the QP's class they share the data buffer)
        self.ecn = cfg.ecn
        self.kmin, self.kmax, self.pmax = cfg.ecn_kmin_bytes, cfg.ecn_kmax_bytes, cfg.ecn_pmax
        self.rng = rng
        # Arbitration between packets arriving at one switch at the same picosecond: a seeded
        # per-link key XORed with a hash of the arrival time, so which ingress goes first
        # changes from instant to instant (as a switch's round-robin arbiter does) instead of
        # the lower link id always winning (which let one of two symmetric incast flows finish
        # first every time). The key depends only on (link, arrival time, seed): no result
        # depends on the order events were created in (commit window, fast path).
        self.L_tie = _ints(int(x) for x in rng.permutation(n)) if n else _ints([])
        self.tie_mask = (1 << max(1, n.bit_length())) - 1
        self._draws = _uniform_blocks(rng)
        self.cnp_gen = None
        self.nic_active: list[list] = []
        self.flow_dlv: list[int] = []
        self.active_qps = 0
        self.inj_pkts = self.inj_bytes = self.dlv_pkts = self.dlv_bytes = self.disc_pkts = 0
        self.drop_buf = self.drop_hr = self.drop_link = 0
        self.ctrl_pkts = self.cnps_tx = self.cnps_rx = self.nacks_rx = self.timeouts = 0
        self.pause_frames = self.resume_frames = self.pause_refreshes = 0
        self.pause_expiries = self.watchdog_storms = 0
        self.events = 0
        self.deadlocks: list[dict] = []
        # Compiled build only: port wakes and link arrivals go on a C heap (same order).
        self.hq = _cheap.CHeap() if COMPILED else None
        self._bind_hot_path()

    # ---------------------------------------------------------------- event loop
    def run(self, until_ps: int) -> None:
        """Run events up to *until_ps* or until every QP is done or failed."""
        self._bind_hot_path()
        q = self.q
        env = self.env
        n = 0
        # The loop allocates a packet record or a heap entry per event and makes no reference
        # cycles; the cyclic collector would only rescan the fabric's long-lived objects
        # (about a tenth of the run time). Reference counting still frees everything.
        gc_on = gc.isenabled()
        gc.disable()
        hq = self.hq
        n0 = hq.events if hq is not None else 0
        try:
            if hq is not None:  # compiled build: the loop below, over both heaps (_cheap.pyx)
                _cheap.run_loop(hq, q, env, until_ps)
            while q and hq is None:
                item = heappop(q)
                try:
                    t, _e, fn, a, b = item
                except ValueError:  # a genuine simpy event (process, timeout) sharing the heap
                    t = item[0]
                    if t > until_ps:
                        heappush(q, item)
                        break
                    env._now = t
                    n += 1
                    fire_simpy(item[3])
                    continue
                if t > until_ps:
                    heappush(q, item)
                    break
                env._now = t
                n += 1
                fn(t, a, b)
        except _Done:
            pass
        finally:
            if gc_on:
                gc.enable()
            if hq is not None:
                n += hq.events - n0
        self.events += n

    def at(self, t_ps: int, fn, a=None, b=None) -> None:
        """Schedule ``fn(t, a, b)`` at *t_ps*."""
        heappush(self.q, (int(t_ps), next(self.eid), fn, a, b))

    def _cc_timer(self, t, fn, qp):
        """A congestion-control timer of *qp* fired; its rate may have changed."""
        fn()
        self._repace(t, qp)

    def _qp_finished(self, t):
        self.active_qps -= 1
        if self.active_qps <= 0:
            raise _Done

    # ---------------------------------------------------------------- ports
    def _bind_hot_path(self) -> None:
        """Install the per-packet functions (``_kick``, ``_wake``, ``_serve``, ``_tx``,
        ``_arrive``) as closures over the port and switch arrays (see :func:`_hot_path`)."""
        for name, fn in _hot_path(self).items():
            setattr(self, name, fn)
        self._arrive_cb = self._arrive
        self._wake_cb = self._wake

    def _lost(self, lk, pkt):
        if pkt.kind == DATA:
            self.drop_link += 1
            self.P_drop[lk] += 1

    def _drop_admit(self, pkt, nl, headroom):
        """A packet for egress *nl* found no buffer (or headroom): count it by kind."""
        self.P_drop[nl] += 1
        if pkt.kind != DATA:
            self.drop_ctrl += 1
        elif headroom:
            self.drop_hr += 1
        else:
            self.drop_buf += 1

    @staticmethod
    def _cnp_from(ctrl):
        """Take the first CNP out of a control queue (None if it holds none)."""
        for i, pkt in enumerate(ctrl):
            if pkt.kind == CNP:
                del ctrl[i]
                return pkt
        return None

    def _send_pause(self, t, lk, ib):
        """Ingress queue of link *lk* passed XOFF: PAUSE its upstream port."""
        self.I_xoff[lk] = True
        self.I_level[lk] = ib
        self.I_pause_tx[lk] += 1
        self.I_gen[lk] += 1
        self.N_xoff[self.L_dst[lk]].add(lk)
        self.pause_frames += 1
        self._pfc_frame_out(t, lk, True)
        if self.refresh:
            self.at(t + self.P_ptime[lk] // 2, self._pfc_refresh, lk, self.I_gen[lk])

    def _send_resume(self, t, lk):
        """Ingress queue of link *lk* fell to XON: RESUME (a PAUSE with zero quanta)."""
        self.I_xoff[lk] = False
        self.I_gen[lk] += 1
        self.N_xoff[self.L_dst[lk]].discard(lk)
        self.resume_frames += 1
        self._pfc_frame_out(t, lk, False)

    def _pfc_frame_out(self, t, lk, on):
        """Send a PFC frame for ingress *lk* upstream (802.1Qbb): it leaves on the reverse port
        once the frame in flight there is out, then crosses the cable."""
        rev = self.L_rev[lk]
        depart = t
        if rev >= 0 and self.P_busy[rev] > t:
            depart = self.P_busy[rev]
        arrive = depart + self.ctrl_size * _PS_BITS // self.L_rate[lk] + self.L_prop[lk]
        self.at(arrive, self._pfc_frame_in, lk, on)

    def _pfc_refresh(self, t, lk, gen):
        """Half a pause time after XOFF: resend the PAUSE if the ingress is still above XON."""
        if self.I_gen[lk] != gen or not self.I_xoff[lk] or not self.L_up[lk]:
            return
        self.pause_refreshes += 1
        self._pfc_frame_out(t, lk, True)
        self.at(t + self.P_ptime[lk] // 2, self._pfc_refresh, lk, gen)

    def _pfc_frame_in(self, t, lk, on):
        """A PFC frame reached the upstream port *lk*; it acts after the peer response delay."""
        if not self.L_up[lk]:
            return
        eff = t + self.P_resp[lk]
        if on and eff < self.P_pause_eff[lk]:
            self.P_pause_eff[lk] = eff
        self.at(eff, self._pause, lk, on)

    def _release(self, t, pkt):
        """*pkt* leaves its switch: free buffer and ingress accounting, maybe send RESUME.

        With the dynamic threshold the free buffer just grew, so every paused ingress of the
        switch is checked, not only the packet's own (a RESUME is never lost because its
        ingress happened to be empty when the buffer freed).
        """
        lk = pkt.inl
        size = pkt.size
        node = self.L_dst[lk]
        used = self.S_used[node] - size
        self.S_used[node] = used
        self.I_bytes[lk] -= size
        xoffs = self.N_xoff[node]
        if not xoffs:
            return
        thr = self.xoff_static if self.xoff_static is not None else self.alpha * (self.buffer - used)
        if self.xoff_static is not None:
            if lk in xoffs and self.I_bytes[lk] + self.xon_off <= thr:
                self._send_resume(t, lk)
            return
        for il in [i for i in xoffs if self.I_bytes[i] + self.xon_off <= thr]:
            self._send_resume(t, il)

    def _pause(self, t, lk, on):
        """A PFC PAUSE (*on*) or RESUME takes effect at the upstream egress port *lk*."""
        self.P_pause_eff[lk] = _NEVER
        if not on:
            self.P_pause_until[lk] = -1
            self._unpause(t, lk)
            return
        if not self.L_up[lk] or self.P_wd_until[lk] > t:
            return  # cable down, or the PFC watchdog ignores PAUSE on this port
        until = t + self.P_ptime[lk]
        self.P_pause_until[lk] = until
        self.at(until, self._pause_expire, lk, until)
        if not self.P_paused[lk]:
            self.P_paused[lk] = True
            self.P_pause_t0[lk] = t
            self.P_pause_rx[lk] += 1
            self.paused_set.add(lk)
            if self.P_pause_since[lk] < 0:
                self.P_pause_since[lk] = t
            if self.watchdog_ps is not None:
                self.at(self.P_pause_since[lk] + self.watchdog_ps, self._watchdog, lk,
                        self.P_pause_since[lk])

    def _pause_expire(self, t, lk, until):
        """The pause time of the last PAUSE ran out without refresh or RESUME."""
        if self.P_paused[lk] and self.P_pause_until[lk] == until:
            self.pause_expiries += 1
            self._unpause(t, lk)

    def _watchdog(self, t, lk, since):
        """PFC watchdog: the port has been paused since *since* with data waiting: a storm."""
        if not self.P_paused[lk] or self.P_pause_since[lk] != since:
            return
        if not (self.P_data[lk] or self.L_nic[lk] >= 0):
            return
        self.watchdog_storms += 1
        self.P_wd_until[lk] = t + self.watchdog_ps
        self._unpause(t, lk)

    def _unpause(self, t, lk):
        if not self.P_paused[lk]:
            return
        self.P_paused[lk] = False
        self.P_pause_since[lk] = -1
        self.P_paused_ps[lk] += t - self.P_pause_t0[lk]
        self.paused_set.discard(lk)
        if self.P_wake[lk] < 0:
            if self.P_busy[lk] <= t:
                self._serve(t, lk)
            else:
                self._kick(lk, self.P_busy[lk])

    # ---------------------------------------------------------------- faults
    def _link_state(self, t, lk, up):
        """Cable of link *lk* (both directions) goes down or comes back up."""
        for d in (lk, self.L_rev[lk]):
            if d < 0:
                continue
            self.L_up[d] = up
            # A link that goes down forgets its PFC state (no RESUME could cross it).
            self._unpause(t, d)
            self.P_pause_until[d] = -1
            self.I_xoff[d] = False
            self.I_gen[d] += 1
            self.N_xoff[self.L_dst[d]].discard(d)
            if up:
                self._kick(d, max(t, self.P_busy[d]))
        if self.detect_ps is not None and self.reroute is not None:
            # Switches take the member out of (or back into) their ECMP groups once the
            # link-down (link-up) is detected.
            self.at(t + self.detect_ps, self._ecmp_update)
            self.due_everywhere(t + self.detect_ps)

    def due_everywhere(self, t_ps: int) -> None:
        """No NIC commits a packet past *t_ps* (a fabric-wide change: link state, routes)."""
        for lk, nic in enumerate(self.L_nic):
            if nic >= 0:
                heappush(self.P_due[lk], t_ps)

    def _ecmp_update(self, t, _a, _b):
        """ECMP groups follow the links' state as of now (detected after ``link_detect_ps``)."""
        self.route_updates += 1
        self.reroute(t, [lid for lid, up in enumerate(self.L_up) if not up])


def _hot_path(sim: PacketSim) -> dict:
    """The per-packet functions of *sim*, as closures over its arrays and settings.

    They run once per packet and hop, so every list they touch is a closure variable and every
    setting a constant here instead of an attribute of ``sim`` (an attribute lookup on the
    simulator costs about as much as the arithmetic of a hop). Scalars that change during the
    run (counters) stay on ``sim``. The lists are never replaced, only mutated.

    The annotations type them for the compiled build (Cython, ``setup.py``); plain Python never
    evaluates them. Times and sizes are C ``long long`` there (picoseconds and bytes fit in 63
    bits); settings that may be floats are ``double`` (exact for integers below 2**53, as in
    Python's int/float comparisons). The tie hash keeps its low bits only: the product below
    wraps at 64 bits in C, and bits 29..63 of it are the same as Python's exact product's as
    long as ``tie_mask`` < 2**35 links.
    """
    q: list = sim.q
    eid = sim.eid
    L_up: list = sim.L_up
    L_dst: cython.longlong[:] = sim.L_dst
    L_rate: cython.longlong[:] = sim.L_rate
    L_prop: cython.longlong[:] = sim.L_prop
    L_nic: cython.longlong[:] = sim.L_nic
    L_tie: cython.longlong[:] = sim.L_tie
    P_busy: cython.longlong[:] = sim.P_busy
    P_wake: cython.longlong[:] = sim.P_wake
    P_ctrl: list = sim.P_ctrl
    P_data: list = sim.P_data
    P_qb: cython.longlong[:] = sim.P_qb
    P_qmax: cython.longlong[:] = sim.P_qmax
    P_paused: list = sim.P_paused
    P_txb: cython.longlong[:] = sim.P_txb
    P_ecn: cython.longlong[:] = sim.P_ecn
    I_bytes: cython.longlong[:] = sim.I_bytes
    I_xoff: list = sim.I_xoff
    I_level: cython.longlong[:] = sim.I_level
    I_hr_max: cython.longlong[:] = sim.I_hr_max
    S_used: cython.longlong[:] = sim.S_used
    N_xoff: list = sim.N_xoff
    headroom: list = sim.headroom
    L_fly: list = sim.L_fly
    hq: CHeap = sim.hq  # noqa: F821 (cimported in engine.pxd) compiled build: wakes and arrivals
    # go on this C heap, else on q
    cheap: cython.bint = hq is not None
    assert sim.tie_mask < 1 << 35
    tie_mask: cython.longlong = sim.tie_mask
    PS_BITS: cython.longlong = _PS_BITS
    TIE_MUL: cython.ulonglong = _TIE_MUL
    ack_qp: cython.bint = sim.ack_qp
    fast: cython.bint = sim.fast
    pfc: cython.bint = sim.pfc
    ecn: cython.bint = sim.ecn
    ecn_deq: cython.bint = sim.ecn_deq
    cnp_prio: cython.bint = sim.cnp_prio
    buffer: cython.double = sim.buffer
    alpha: cython.double = sim.alpha
    static: cython.bint = sim.xoff_static is not None
    xoff_fixed: cython.double = sim.xoff_static if static else 0.0  # read only when static
    kmin: cython.double = sim.kmin
    kmax: cython.double = sim.kmax
    pmax: cython.double = sim.pmax
    release, lost = sim._release, sim._lost
    uniform = sim._draws.__next__
    drop_admit, send_pause, cnp_from = sim._drop_admit, sim._send_pause, sim._cnp_from
    rx_ctrl = sim._rx_ctrl

    def kick(lk: cython.Py_ssize_t, t: cython.longlong):
        """Make sure port *lk* is served at *t* (one pending wake per port, earliest wins)."""
        w: cython.longlong = P_wake[lk]
        if 0 <= w <= t:
            return
        P_wake[lk] = t
        if cheap:
            hq.push((t, 0, next(eid), wake, lk, None))
        else:
            heappush(q, (t, next(eid), wake, lk, None))

    def wake(t: cython.longlong, lk: cython.Py_ssize_t, _):
        if P_wake[lk] != t:
            return  # superseded by an earlier wake
        P_wake[lk] = -1
        busy: cython.longlong = P_busy[lk]
        if busy > t:
            kick(lk, busy)
        else:
            serve(t, lk)

    def tx(t: cython.longlong, lk: cython.Py_ssize_t, pkt: Pkt):
        """Serialize *pkt* on link *lk* from *t*; it arrives a propagation delay after the end.

        Returns the time the port is free again.
        """
        size: cython.longlong = pkt.size
        rate: cython.longlong = L_rate[lk]
        end: cython.longlong = t + size * PS_BITS // rate
        P_busy[lk] = end
        P_txb[lk] += size
        if L_up[lk]:
            ta: cython.longlong = end + L_prop[lk]
            tie0: cython.longlong = L_tie[lk]
            key: object = ((tie0 ^ (ta * TIE_MUL >> 29)) & tie_mask) + 1
            fly = L_fly[lk]
            if cheap:
                fly.append((ta, key, next(eid), arrive, lk, pkt))
                if len(fly) == 1:
                    hq.push(fly[0])
            else:
                fly.append((ta, key << 40 | next(eid), arrive, lk, pkt))
                if len(fly) == 1:  # the link's first packet in flight: its arrival goes on the heap
                    heappush(q, fly[0])
        else:
            lost(lk, pkt)
        return end

    def serve(t: cython.longlong, lk: cython.Py_ssize_t):
        """Port *lk* is free at *t*: send the next packet (control first, then data).

        A switch port sends one data packet per service, so buffer release, ECN at dequeue and
        PFC see each packet at the time it really leaves. A NIC port commits paced packets up
        to ``commit_ps`` ahead (:meth:`_nic_send`), never past its PFC response delay.
        """
        pkt: Pkt
        ctrl = P_ctrl[lk]
        nicp: cython.longlong = L_nic[lk]
        if ctrl:
            if P_paused[lk] and ack_qp:
                pkt = cnp_from(ctrl)  # a paused class holds ACK/NAKs; CNPs still go
                if pkt is None:
                    return
            else:
                pkt = ctrl.popleft()
            tx(t, lk, pkt)
            if ctrl or P_data[lk] or nicp >= 0:
                kick(lk, P_busy[lk])
            return
        if nicp >= 0:
            if not P_paused[lk]:
                nic_send(t, lk)
            return
        data = P_data[lk]
        if not data or P_paused[lk]:
            return
        pkt = data.popleft()
        size: cython.longlong = pkt.size
        qb: cython.longlong = P_qb[lk]
        qb -= size
        P_qb[lk] = qb
        inl: cython.Py_ssize_t = pkt.inl
        node: cython.Py_ssize_t = L_dst[inl]
        if N_xoff[node]:
            release(t, pkt)
        else:  # _release without a paused ingress to check
            S_used[node] -= size
            I_bytes[inl] -= size
        if ecn_deq and qb > kmin and ecn and pkt.kind == DATA:
            # HPCC ns-3 marks on dequeue with the bytes left behind the leaving packet.
            if qb >= kmax or uniform() < pmax * (qb - kmin) / (kmax - kmin):
                pkt.ecn = 1
                P_ecn[lk] += 1
        rate: cython.longlong = L_rate[lk]
        end: cython.longlong = t + size * PS_BITS // rate
        P_busy[lk] = end  # tx, inlined
        P_txb[lk] += size
        if L_up[lk]:
            ta: cython.longlong = end + L_prop[lk]
            tie0: cython.longlong = L_tie[lk]
            key: object = ((tie0 ^ (ta * TIE_MUL >> 29)) & tie_mask) + 1
            fly = L_fly[lk]
            if cheap:
                fly.append((ta, key, next(eid), arrive, lk, pkt))
                if len(fly) == 1:
                    hq.push(fly[0])
            else:
                fly.append((ta, key << 40 | next(eid), arrive, lk, pkt))
                if len(fly) == 1:  # the link's first packet in flight: its arrival goes on the heap
                    heappush(q, fly[0])
        else:
            lost(lk, pkt)
        if data:
            # kick, inlined (this port's wake was cleared by wake(), or it had none)
            w: cython.longlong = P_wake[lk]
            if not 0 <= w <= end:
                P_wake[lk] = end
                if cheap:
                    hq.push((end, 0, next(eid), wake, lk, None))
                else:
                    heappush(q, (end, next(eid), wake, lk, None))

    def arrive(t: cython.longlong, lk: cython.Py_ssize_t, pkt: Pkt):
        """*pkt* has fully arrived over link *lk* at the link's head node."""
        busy: cython.longlong
        fly = L_fly[lk]
        fly.popleft()
        if fly:  # the link's next arrival goes on the heap
            if cheap:
                hq.push(fly[0])
            else:
                heappush(q, fly[0])
        if not L_up[lk]:
            lost(lk, pkt)
            return
        route = pkt.route
        h: cython.Py_ssize_t = pkt.hop + 1
        kind: cython.int = pkt.kind
        if h == len(route):
            if kind == DATA:
                rx_data(t, pkt)
            else:
                rx_ctrl(t, pkt)
            return
        pkt.hop = h
        nl: cython.Py_ssize_t = route[h]
        if kind != DATA and (not ack_qp or (kind == CNP and cnp_prio)):
            P_ctrl[nl].append(pkt)
            w: cython.longlong = P_wake[nl]
            if w < 0:
                busy = P_busy[nl]
                if busy <= t:
                    serve(t, nl)
                else:
                    kick(nl, busy)
            return
        busy = P_busy[nl]
        node: cython.Py_ssize_t = L_dst[lk]
        size: cython.longlong = pkt.size
        used: cython.longlong = S_used[node]
        xoff: cython.bint = I_xoff[lk]
        w = P_wake[nl]
        ibytes: cython.longlong = I_bytes[lk]
        if busy <= t and fast and not xoff and w < 0 \
                and not P_data[nl] and not P_paused[nl] and not P_ctrl[nl] \
                and used + size <= buffer and (not pfc or ibytes + size <= (
                    xoff_fixed if static else alpha * (buffer - used))):
            # Idle port, empty queue, no PFC threshold in reach: cut straight to the wire (the
            # buffer would hold it for no time; the same as the slow path below, which records
            # the packet's own size as the port's queue maximum). tx, inlined.
            qmax: cython.longlong = P_qmax[nl]
            if size > qmax:
                P_qmax[nl] = size
            rate: cython.longlong = L_rate[nl]
            end: cython.longlong = t + size * PS_BITS // rate
            P_busy[nl] = end
            P_txb[nl] += size
            if L_up[nl]:
                ta: cython.longlong = end + L_prop[nl]
                tie0: cython.longlong = L_tie[nl]
                key: object = ((tie0 ^ (ta * TIE_MUL >> 29)) & tie_mask) + 1
                fly = L_fly[nl]
                if cheap:
                    fly.append((ta, key, next(eid), arrive, nl, pkt))
                    if len(fly) == 1:
                        hq.push(fly[0])
                else:
                    fly.append((ta, key << 40 | next(eid), arrive, nl, pkt))
                    if len(fly) == 1:  # the link's first packet in flight: its arrival goes on the heap
                        heappush(q, fly[0])
            else:
                lost(nl, pkt)
            return
        # ---- data: buffer admission, PFC, ECN
        # Headroom is a reserved pool: a paused ingress queue spills into it, not the shared buffer.
        if used + size > buffer and not (pfc and xoff):
            drop_admit(pkt, nl, False)
            return
        qb: cython.longlong = P_qb[nl]
        if busy > t:  # bytes still to serialize of the packets already committed
            rate = L_rate[nl]
            qb += (busy - t) * rate // PS_BITS
        thr: cython.double = xoff_fixed if static else alpha * (buffer - used)
        ib: cython.longlong
        hr: cython.longlong
        lim: cython.longlong
        if pfc:
            ib = ibytes + size
            if xoff:
                lim = I_level[lk]
                hr = ib - lim
                lim = headroom[lk]
                if hr > lim:
                    drop_admit(pkt, nl, True)
                    return
                lim = I_hr_max[lk]
                if hr > lim:
                    I_hr_max[lk] = hr
            elif ib > thr:
                send_pause(t, lk, ib)
            I_bytes[lk] = ib
        elif qb + size > thr:
            drop_admit(pkt, nl, False)
            return
        S_used[node] = used + size
        if qb > kmin and ecn and not ecn_deq and kind == DATA:
            if qb >= kmax or uniform() < pmax * (qb - kmin) / (kmax - kmin):
                pkt.ecn = 1
                P_ecn[nl] += 1
        pkt.inl = lk
        P_data[nl].append(pkt)
        P_qb[nl] += size
        qmax = P_qmax[nl]
        if qb + size > qmax:
            P_qmax[nl] = qb + size
        w = P_wake[nl]
        if w < 0:
            if busy <= t:
                serve(t, nl)
            elif not P_paused[nl]:
                kick(nl, busy)

    nic = nic_path(sim, tx, kick, serve)
    nic_send, rx_data = nic["_nic_send"], nic["_rx_data"]
    return {"_kick": kick, "_wake": wake, "_tx": tx, "_serve": serve, "_arrive": arrive, **nic}
