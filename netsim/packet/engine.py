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
from netsim.packet.telemetry import stalled_cycle

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
        # PFC deadlock detection (telemetry.stalled_cycle): a cycle of paused ports none of
        # whose ingress queues let a packet out for ``deadlock_ps``; one record per episode.
        self.deadlock_ps = cfg.pfc_deadlock_ps
        self.I_out_ps = [-1] * n  # last departure from ingress lk while its switch held an XOFF
        self.deadlock_since: dict[int, int] = {}  # link -> pause start of its recorded episode
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
                _run_compiled(self._fabric, q, env, until_ps)
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
        fns = _hot_path(self)
        self._fabric = fns.pop("_fabric")
        for name, fn in fns.items():
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
            if self.deadlock_ps is not None:
                self.at(self.P_pause_since[lk] + self.deadlock_ps, self._deadlock_check, lk,
                        self.P_pause_since[lk])

    def _pause_expire(self, t, lk, until):
        """The pause time of the last PAUSE ran out without refresh or RESUME."""
        if self.P_paused[lk] and self.P_pause_until[lk] == until:
            self.pause_expiries += 1
            self._unpause(t, lk)

    def _deadlock_check(self, t, lk, since):
        """Port *lk*, paused since *since*, may have stalled for ``deadlock_ps``: record a PFC
        deadlock if a cycle of stalled ports runs through it (``telemetry.stalled_cycle``).
        While the port stays paused the check comes back: when its ingress last moved plus
        the window, or one window later."""
        if not self.P_paused[lk] or self.P_pause_since[lk] != since:
            return  # this pause ended: a new one schedules its own check
        quiet = max(since, self.I_out_ps[lk])
        if quiet + self.deadlock_ps > t:
            self.at(quiet + self.deadlock_ps, self._deadlock_check, lk, since)
            return
        cycle = stalled_cycle(self, t, lk, self.deadlock_ps)
        if cycle is None:
            self.at(t + self.deadlock_ps, self._deadlock_check, lk, since)
            return
        self._record_deadlock(t, cycle)

    def _record_deadlock(self, t, cycle):
        """Count *cycle* once per episode: an episode lasts while every port of it that was
        recorded stays paused without a break."""
        since = self.P_pause_since
        ongoing = any(self.deadlock_since.get(lid) == since[lid] for lid in cycle)
        for lid in cycle:
            self.deadlock_since[lid] = since[lid]
        if ongoing:
            return
        names = getattr(self, "node_names", None)
        stalled = max(max(since[lid], self.I_out_ps[lid]) for lid in cycle)
        self.deadlocks.append({
            "t_ns": t / 1000, "stalled_since_ns": stalled / 1000, "links": sorted(cycle),
            "nodes": [names[self.L_src[lid]] if names is not None else self.L_src[lid]
                      for lid in cycle]})

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
            self._port_ready(t, lk)

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


class _Fabric:
    """The port and switch arrays and settings the per-packet functions read (see
    :func:`_hot_path`), gathered once per run. The compiled build declares it an extension
    type (``engine.pxd``): its fields are C fields, the arrays typed memoryviews, so the
    helpers below read them as cheaply as closure variables. Scalars that change during the
    run (counters) stay on ``sim``; the lists are never replaced, only mutated.

    Times and sizes are C ``long long`` there (picoseconds and bytes fit in 63 bits); settings
    that may be floats are ``double`` (exact for integers below 2**53, as in Python's
    int/float comparisons). The tie hash keeps its low bits only: the product in
    :func:`_launch` wraps at 64 bits in C, and bits 29..63 of it are the same as Python's
    exact product's as long as ``tie_mask`` < 2**35 links.
    """

    def __init__(self, sim: PacketSim):
        self.q = sim.q
        self.eid = sim.eid
        self.L_up = sim.L_up
        self.L_dst = sim.L_dst
        self.L_rate = sim.L_rate
        self.L_prop = sim.L_prop
        self.L_nic = sim.L_nic
        self.L_tie = sim.L_tie
        self.L_fly = sim.L_fly
        self.P_busy = sim.P_busy
        self.P_wake = sim.P_wake
        self.P_ctrl = sim.P_ctrl
        self.P_data = sim.P_data
        self.P_qb = sim.P_qb
        self.P_qmax = sim.P_qmax
        self.P_paused = sim.P_paused
        self.P_txb = sim.P_txb
        self.P_ecn = sim.P_ecn
        self.I_bytes = sim.I_bytes
        self.I_xoff = sim.I_xoff
        self.I_level = sim.I_level
        self.I_hr_max = sim.I_hr_max
        self.S_used = sim.S_used
        self.N_xoff = sim.N_xoff
        self.headroom = sim.headroom
        self.hq = sim.hq  # compiled build: wakes and arrivals go on this C heap, else on q
        self.cheap = sim.hq is not None
        assert sim.tie_mask < 1 << 35
        self.tie_mask = sim.tie_mask
        self.PS_BITS = _PS_BITS
        self.TIE_MUL = _TIE_MUL
        self._settings(sim)
        self.lost = sim._lost
        self.I_out_ps, self.xon_off = sim.I_out_ps, sim.xon_off
        self.uniform = sim._draws.__next__
        self.drop_admit, self.send_pause = sim._drop_admit, sim._send_pause
        self.send_resume = sim._send_resume
        self.cnp_from = sim._cnp_from
        self.rx_ctrl = None  # the NIC's, set by _hot_path
        # the callbacks this module puts on the heaps, and the NIC's (set by _hot_path)
        self.wake = self.arrive = self.nic_send = self.rx_data = None

    def _settings(self, sim: PacketSim) -> None:
        """The configuration the hot path reads (constants for the run)."""
        self.ack_qp = sim.ack_qp
        self.fast = sim.fast
        self.pfc = sim.pfc
        self.ecn = sim.ecn
        self.ecn_deq = sim.ecn_deq
        self.cnp_prio = sim.cnp_prio
        self.cnps = sim.cnp_gen is not None  # CNPs exist only where receivers send them
        self.buffer = sim.buffer
        self.alpha = sim.alpha
        self.static = sim.xoff_static is not None
        self.xoff_fixed = sim.xoff_static if self.static else 0.0  # read only when static
        self.kmin = sim.kmin
        self.kmax = sim.kmax
        self.pmax = sim.pmax


def _kick(f: _Fabric, lk: cython.Py_ssize_t, t: cython.longlong):
    """Make sure port *lk* is served at *t* (one pending wake per port, earliest wins)."""
    w: cython.longlong = f.P_wake[lk]
    if 0 <= w <= t:
        return
    f.P_wake[lk] = t
    if f.cheap:
        f.hq.push_wake(t, next(f.eid), lk)
    else:
        heappush(f.q, (t, next(f.eid), f.wake, lk, None))


def _wake(f: _Fabric, t: cython.longlong, lk: cython.Py_ssize_t):
    """The wake of port *lk* at *t*: serve it, or wait until it is free."""
    if f.P_wake[lk] != t:
        return  # superseded by an earlier wake
    f.P_wake[lk] = -1
    busy: cython.longlong = f.P_busy[lk]
    if busy > t:
        _kick(f, lk, busy)
    else:
        _serve(f, t, lk)


def _tx(f: _Fabric, t: cython.longlong, lk: cython.Py_ssize_t, pkt: Pkt) -> cython.longlong:
    """Serialize *pkt* on link *lk* from *t*; it arrives a propagation delay after the end.

    Returns the time the port is free again.
    """
    size: cython.longlong = pkt.size
    rate: cython.longlong = f.L_rate[lk]
    end: cython.longlong = t + size * f.PS_BITS // rate
    f.P_busy[lk] = end
    f.P_txb[lk] += size
    if f.L_up[lk]:
        _launch(f, lk, pkt, end + f.L_prop[lk])
    else:
        f.lost(lk, pkt)
    return end


def _launch(f: _Fabric, lk: cython.Py_ssize_t, pkt: Pkt, ta: cython.longlong):
    """*pkt* is on the wire of link *lk* and arrives at *ta*: queue it behind the link's
    packets in flight (only the first of them is on a heap)."""
    tie0: cython.longlong = f.L_tie[lk]
    key: cython.longlong = ((tie0 ^ (ta * f.TIE_MUL >> 29)) & f.tie_mask) + 1
    fly = f.L_fly[lk]
    if f.cheap:  # the packet waits on the link with its own key (no tuple per hop)
        pkt.ta, pkt.tkey, pkt.teid = ta, key, next(f.eid)
        fly.append(pkt)
        if len(fly) == 1:
            f.hq.push_arrival(ta, key, pkt.teid, lk, pkt)
    else:
        fly.append((ta, key << 40 | next(f.eid), f.arrive, lk, pkt))
        if len(fly) == 1:  # the link's first packet in flight: its arrival goes on the heap
            heappush(f.q, fly[0])


def _serve(f: _Fabric, t: cython.longlong, lk: cython.Py_ssize_t):
    """Port *lk* is free at *t*: send the next packet (control first, then data).

    A switch port sends one data packet per service, so buffer release, ECN at dequeue and
    PFC see each packet at the time it really leaves. A NIC port commits paced packets up
    to ``commit_ps`` ahead (:meth:`_nic_send`), never past its PFC response delay.
    """
    ctrl = f.P_ctrl[lk]
    if ctrl:
        _serve_ctrl(f, t, lk, ctrl)
        return
    if f.L_nic[lk] >= 0:
        if not f.P_paused[lk]:
            f.nic_send(t, lk)
        return
    _serve_data(f, t, lk)


def _serve_ctrl(f: _Fabric, t: cython.longlong, lk: cython.Py_ssize_t, ctrl):
    """Send the first packet of port *lk*'s control class (*ctrl*, not empty)."""
    pkt: Pkt
    if f.P_paused[lk] and f.ack_qp:
        if not f.cnps:
            return  # no receiver sends CNPs: a paused class holds only ACK/NAKs
        pkt = f.cnp_from(ctrl)  # a paused class holds ACK/NAKs; CNPs still go
        if pkt is None:
            return
    else:
        pkt = ctrl.popleft()
    _tx(f, t, lk, pkt)
    if ctrl or f.P_data[lk] or f.L_nic[lk] >= 0:
        _kick(f, lk, f.P_busy[lk])


def _serve_data(f: _Fabric, t: cython.longlong, lk: cython.Py_ssize_t):
    """Send the first data packet queued at switch port *lk*, unless it is paused."""
    data = f.P_data[lk]
    if not data or f.P_paused[lk]:
        return
    pkt: Pkt = data.popleft()
    size: cython.longlong = pkt.size
    qb: cython.longlong = f.P_qb[lk]
    qb -= size
    f.P_qb[lk] = qb
    inl: cython.Py_ssize_t = pkt.inl
    node: cython.Py_ssize_t = f.L_dst[inl]
    if f.N_xoff[node]:
        _release(f, t, pkt)
    else:  # _release without a paused ingress to check
        f.S_used[node] -= size
        f.I_bytes[inl] -= size
    if f.ecn_deq and qb > f.kmin and f.ecn and pkt.kind == DATA:
        # HPCC ns-3 marks on dequeue with the bytes left behind the leaving packet.
        _red_mark(f, qb, pkt, lk)
    end: cython.longlong = _tx(f, t, lk, pkt)
    if data:
        _kick(f, lk, end)  # this port's wake was cleared by wake(), or it had none


def _release(f: _Fabric, t: cython.longlong, pkt: Pkt):
    """*pkt* leaves its switch, which holds an XOFF: free buffer and ingress accounting,
    maybe send RESUME.

    With the dynamic threshold the free buffer just grew, so every paused ingress of the
    switch is checked, not only the packet's own (a RESUME is never lost because its
    ingress happened to be empty when the buffer freed).
    """
    lk: cython.Py_ssize_t = pkt.inl
    size: cython.longlong = pkt.size
    node: cython.Py_ssize_t = f.L_dst[lk]
    f.I_out_ps[lk] = t  # progress of this ingress (deadlock detection)
    used: cython.longlong = f.S_used[node] - size
    f.S_used[node] = used
    f.I_bytes[lk] -= size
    xoffs: set = f.N_xoff[node]
    thr: cython.double = _xoff_at(f, used)
    if f.static:
        if lk in xoffs and f.I_bytes[lk] + f.xon_off <= thr:
            f.send_resume(t, lk)
        return
    il: cython.Py_ssize_t
    for il in [i for i in xoffs if f.I_bytes[i] + f.xon_off <= thr]:
        f.send_resume(t, il)


def _red_mark(f: _Fabric, qb: cython.longlong, pkt: Pkt, lk: cython.Py_ssize_t):
    """RED/ECN above Kmin: mark *pkt* with a probability rising to Pmax at Kmax (*qb* bytes
    queued at egress *lk*)."""
    if qb >= f.kmax or f.uniform() < f.pmax * (qb - f.kmin) / (f.kmax - f.kmin):
        pkt.ecn = 1
        f.P_ecn[lk] += 1


def _xoff_at(f: _Fabric, used: cython.longlong) -> cython.double:
    """The XOFF threshold of an ingress queue (static, or ``alpha x free buffer``) when the
    switch holds *used* bytes."""
    return f.xoff_fixed if f.static else f.alpha * (f.buffer - used)


def _arrive(f: _Fabric, t: cython.longlong, lk: cython.Py_ssize_t, pkt: Pkt):
    """*pkt* has fully arrived over link *lk* at the link's head node."""
    fly = f.L_fly[lk]
    fly.popleft()
    nxt: Pkt
    if fly:  # the link's next arrival goes on the heap
        if f.cheap:
            nxt = fly[0]
            f.hq.push_arrival(nxt.ta, nxt.tkey, nxt.teid, lk, nxt)
        else:
            heappush(f.q, fly[0])
    if not f.L_up[lk]:
        f.lost(lk, pkt)
        return
    route = pkt.route
    h: cython.Py_ssize_t = pkt.hop + 1
    kind: cython.int = pkt.kind
    if h == len(route):
        if kind == DATA:
            f.rx_data(t, pkt)
        else:
            f.rx_ctrl(t, pkt)
        return
    pkt.hop = h
    nl: cython.Py_ssize_t = route[h]
    if kind != DATA and (not f.ack_qp or (kind == CNP and f.cnp_prio)):
        _forward_ctrl(f, t, nl, pkt)
    elif not _cut_through(f, t, lk, nl, pkt):
        _enqueue(f, t, lk, nl, pkt)


def _forward_ctrl(f: _Fabric, t: cython.longlong, nl: cython.Py_ssize_t, pkt: Pkt):
    """A control packet in the strict-priority class goes to egress *nl*'s control queue."""
    f.P_ctrl[nl].append(pkt)
    w: cython.longlong = f.P_wake[nl]
    if w < 0:
        busy: cython.longlong = f.P_busy[nl]
        if busy <= t:
            _serve(f, t, nl)
        else:
            _kick(f, nl, busy)


def _cut_through(f: _Fabric, t: cython.longlong, lk: cython.Py_ssize_t, nl: cython.Py_ssize_t,
                 pkt: Pkt) -> cython.bint:
    """Idle port, empty queue, no PFC threshold in reach: send *pkt* (in over *lk*) straight
    on egress *nl* and return True (the buffer would hold it for no time; the same as
    :func:`_enqueue`, which records the packet's own size as the port's queue maximum)."""
    if not f.fast:
        return False
    busy: cython.longlong = f.P_busy[nl]
    node: cython.Py_ssize_t = f.L_dst[lk]
    size: cython.longlong = pkt.size
    used: cython.longlong = f.S_used[node]
    w: cython.longlong = f.P_wake[nl]
    ibytes: cython.longlong = f.I_bytes[lk]
    if busy <= t and not f.I_xoff[lk] and w < 0 \
            and not f.P_data[nl] and not f.P_paused[nl] and not f.P_ctrl[nl] \
            and used + size <= f.buffer and (not f.pfc or ibytes + size <= _xoff_at(f, used)):
        qmax: cython.longlong = f.P_qmax[nl]
        if size > qmax:
            f.P_qmax[nl] = size
        _tx(f, t, nl, pkt)
        return True
    return False


def _enqueue(f: _Fabric, t: cython.longlong, lk: cython.Py_ssize_t, nl: cython.Py_ssize_t,
             pkt: Pkt):
    """A packet in the data class (in over *lk*) for egress *nl*: buffer admission, PFC, ECN,
    then the egress queue. Headroom is a reserved pool: a paused ingress queue spills into
    it, not the shared buffer."""
    busy: cython.longlong = f.P_busy[nl]
    node: cython.Py_ssize_t = f.L_dst[lk]
    size: cython.longlong = pkt.size
    used: cython.longlong = f.S_used[node]
    xoff: cython.bint = f.I_xoff[lk]
    if used + size > f.buffer and not (f.pfc and xoff):
        f.drop_admit(pkt, nl, False)
        return
    qb: cython.longlong = f.P_qb[nl]
    rate: cython.longlong
    if busy > t:  # bytes still to serialize of the packets already committed
        rate = f.L_rate[nl]
        qb += (busy - t) * rate // f.PS_BITS
    thr: cython.double = _xoff_at(f, used)
    if f.pfc:
        if not _pfc_ingress(f, t, lk, nl, pkt, xoff, thr):
            return
    elif qb + size > thr:
        f.drop_admit(pkt, nl, False)
        return
    f.S_used[node] = used + size
    if qb > f.kmin and f.ecn and not f.ecn_deq and pkt.kind == DATA:
        _red_mark(f, qb, pkt, nl)
    pkt.inl = lk
    f.P_data[nl].append(pkt)
    f.P_qb[nl] += size
    qmax: cython.longlong = f.P_qmax[nl]
    if qb + size > qmax:
        f.P_qmax[nl] = qb + size
    w: cython.longlong = f.P_wake[nl]
    if w < 0:
        if busy <= t:
            _serve(f, t, nl)
        elif not f.P_paused[nl]:
            _kick(f, nl, busy)


def _pfc_ingress(f: _Fabric, t: cython.longlong, lk: cython.Py_ssize_t,
                 nl: cython.Py_ssize_t, pkt: Pkt, xoff: cython.bint,
                 thr: cython.double) -> cython.bint:
    """PFC accounting of *pkt* on ingress *lk* (XOFF threshold *thr*): spill into headroom
    while paused (False: dropped, headroom full), or PAUSE upstream on passing XOFF."""
    ib: cython.longlong = f.I_bytes[lk] + pkt.size
    hr: cython.longlong
    lim: cython.longlong
    if xoff:
        lim = f.I_level[lk]
        hr = ib - lim
        lim = f.headroom[lk]
        if hr > lim:
            f.drop_admit(pkt, nl, True)
            return False
        lim = f.I_hr_max[lk]
        if hr > lim:
            f.I_hr_max[lk] = hr
    elif ib > thr:
        f.send_pause(t, lk, ib)
    f.I_bytes[lk] = ib
    return True


def _run_compiled(f: _Fabric, q: list, env, until_ps: cython.longlong):
    """The compiled build's event loop (``PacketSim.run``): the hot path's events from the C
    heap ``f.hq`` (port wakes and link arrivals, dispatched to :func:`_wake` and
    :func:`_arrive` directly), everything else from simpy's heap *q*, in the plain path's
    order (``CHeap.source``). Counts events in ``f.hq.events`` (also when a callback raises
    to end the run)."""
    src: cython.int
    kind: cython.int
    t: cython.longlong
    while True:
        src = f.hq.source(q, until_ps)
        if src == 0:
            return
        f.hq.events += 1
        if src == 1:
            item = heappop(q)
            env._now = item[0]
            if len(item) == 4:  # a genuine simpy event (process, timeout) sharing the heap
                fire_simpy(item[3])
            else:
                item[2](item[0], item[3], item[4])
            continue
        kind = f.hq.pop_top()
        t = f.hq.top.t
        env._now = t
        if kind == 1:
            _wake(f, t, f.hq.top.lk)
        elif kind == 2:
            _arrive(f, t, f.hq.top.lk, f.hq.take())
        else:
            e = f.hq.take()
            e[3](t, e[4], e[5])


def _hot_path(sim: PacketSim) -> dict:
    """The per-packet functions of *sim*: closures over its arrays and settings
    (:class:`_Fabric`), each handing its event to the helper above that does the work.

    They run once per packet and hop, so every array they touch is read from one record of
    the run instead of an attribute of ``sim`` (an attribute lookup on the simulator costs
    about as much as the arithmetic of a hop). In the compiled build (Cython, ``setup.py``,
    ``engine.pxd``) the helpers are C functions that call each other directly; plain Python
    runs the same code.
    """
    f: _Fabric = _Fabric(sim)

    def kick(lk: cython.Py_ssize_t, t: cython.longlong):
        _kick(f, lk, t)

    def wake(t: cython.longlong, lk: cython.Py_ssize_t, _):
        _wake(f, t, lk)

    def tx(t: cython.longlong, lk: cython.Py_ssize_t, pkt: Pkt):
        return _tx(f, t, lk, pkt)

    def serve(t: cython.longlong, lk: cython.Py_ssize_t):
        _serve(f, t, lk)

    def arrive(t: cython.longlong, lk: cython.Py_ssize_t, pkt: Pkt):
        _arrive(f, t, lk, pkt)

    f.wake, f.arrive = wake, arrive
    nic = nic_path(sim, tx, kick, serve)
    f.nic_send, f.rx_data, f.rx_ctrl = nic["_nic_send"], nic["_rx_data"], nic["_rx_ctrl"]
    return {"_fabric": f, "_kick": kick, "_wake": wake, "_tx": tx, "_serve": serve, "_arrive": arrive, **nic}
