"""PFC headroom sizing check: is each lossless ingress queue's headroom what 802.1Qbb needs?

After an ingress queue crosses XOFF, bytes keep arriving until the PAUSE takes effect upstream:
the frame the switch is sending on the reverse port when XOFF is decided (one MTU), the PAUSE's
trip over the cable, the peer's response delay, the frame the peer has started (one MTU) and
the bytes already on the cable coming back. The formula is SONiC's "well-known formula"
(``doc/qos/dynamically-headroom-calculation.md``, ``../shared/reference/nccl-roce.md`` 5.4),
with the IEEE 802.3 Annex 31B peer-response quanta per port speed:

``headroom = 2 x frame + 2 x rate x cable delay + response quanta x 512 / 8``

The packet engine models exactly these terms (``netsim.packet.config``: PAUSE after the frame
in flight, cable delay, ``pfc_response_quanta``), and :func:`netsim.packet.config.headroom_bytes_for`
is the one implementation; ``netsim recommend`` sizes the switch's headroom with it too
(``tuner.render.headroom_bytes``).

Two checks, each a :class:`HeadroomWarning`:

* ``headroom``: a class of lossless ingress ports (link kind x speed x cable delay) whose
  headroom (``PacketConfig.headroom_bytes``) is below the formula's need, with the peer response
  the run uses (``pfc_response_quanta`` or the IEEE value): packets arriving before the PAUSE
  takes effect are dropped on a "lossless" class.
* ``buffer``: a switch whose buffer (``buffer_bytes``) cannot hold the headroom of all its
  lossless ingress ports. Switches carve headroom out of the same memory; here, once paused
  ingresses' headroom fills it, packets of the ingresses that are not paused are dropped
  (``tests/netsim/packet/test_headroom.py``: a 12:1 incast at 400 G with a 1 MB buffer drops
  124 packets and waits for retransmit timeouts; with the buffer this check asks for it drops
  none).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass

import numpy as np

from netsim.packet.config import PacketConfig, headroom_bytes_for, pause_quanta_for
from topologies.units import ns_to_ps


@dataclass(frozen=True)
class HeadroomWarning:
    """One sizing problem of the lossless class, with the bytes it needs."""

    kind: str            # "headroom" (per port class) or "buffer" (per switch)
    where: str           # the port class or the switch(es)
    ports: int           # lossless ingress ports concerned
    have_bytes: int      # headroom per port ("headroom") or buffer per switch ("buffer")
    needed_bytes: int    # the same quantity as 802.1Qbb timing needs it
    message: str

    def to_json(self) -> dict:
        return asdict(self)


def needed_headroom_bytes(rate_bps: int, latency_ps: int, cfg: PacketConfig) -> int:
    """Headroom one lossless ingress queue needs at *rate_bps* behind a cable of *latency_ps*."""
    quanta = (cfg.pfc_response_quanta if cfg.pfc_response_quanta is not None
              else pause_quanta_for(rate_bps))
    return headroom_bytes_for(rate_bps, latency_ps, cfg.wire_bytes, quanta=quanta)


def _lossless_ingress(fabric) -> np.ndarray:
    """Network links (from a NIC or switch) into a switch: a lossless ingress queue there."""
    names = fabric.nodes
    hosts = set(fabric.nics) | set(getattr(fabric, "gpus", ()))
    net = [n not in hosts for n in names]  # switches
    nic = set(fabric.nics)
    src = np.asarray(fabric.link_src, dtype=np.int64).tolist()
    dst = np.asarray(fabric.link_dst, dtype=np.int64).tolist()
    return np.array([i for i, (s, d) in enumerate(zip(src, dst, strict=True))
                     if net[d] and (net[s] or names[s] in nic)], dtype=np.int64)


def check_headroom(fabric, cfg: PacketConfig) -> list[HeadroomWarning]:
    """Sizing warnings of the lossless class of *fabric* under *cfg* (none when PFC is off)."""
    if not cfg.pfc:
        return []
    links = _lossless_ingress(fabric)
    if links.size == 0:
        return []
    rate = np.asarray(fabric.link_capacity_bps)[links].astype(np.int64)
    lat_ns = np.asarray(fabric.link_latency_ns, dtype=float)[links]
    kind_of = getattr(fabric, "link_kind", None)  # duck-typed fabrics may not name link kinds
    kinds = (np.asarray(kind_of).astype(str)[links] if kind_of is not None
             else np.full(links.size, "switch"))
    pairs, inverse = np.unique(np.stack([rate.astype(float), lat_ns]), axis=1, return_inverse=True)
    per_pair = [needed_headroom_bytes(int(r), ns_to_ps(float(t)), cfg) for r, t in pairs.T]
    need = np.asarray(per_pair, dtype=np.int64)[np.ravel(inverse)]
    have = need if cfg.headroom_bytes is None else np.full_like(need, int(cfg.headroom_bytes))
    return _class_warnings(kinds, rate, lat_ns, have, need, cfg) + _buffer_warnings(
        fabric, links, np.maximum(have, need), cfg)


def _class_warnings(kinds, rate, lat_ns, have, need, cfg) -> list[HeadroomWarning]:
    """One warning per port class whose headroom is below the need."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i in np.nonzero(have < need)[0].tolist():
        groups[(kinds[i], int(rate[i]), float(lat_ns[i]))].append(i)
    out = []
    for (kind, r, lat), idx in sorted(groups.items()):
        n, h, nd = len(idx), int(have[idx[0]]), int(need[idx[0]])
        where = f"{kind} ports at {r / 1e9:g}G with {lat:g} ns cables"
        cable = r * ns_to_ps(lat) // (8 * 10**12)
        resp = nd - 2 * cfg.wire_bytes - 2 * cable
        out.append(HeadroomWarning(
            "headroom", where, n, h, nd,
            f"PFC headroom of the lossless class on {n} {where} is {h:,} B per ingress queue, "
            f"below the {nd:,} B that 802.1Qbb timing needs (2 x {cfg.wire_bytes:,} B frame + "
            f"2 x {cable:,} B on the cable + {resp:,} B of peer response): packets arriving before the "
            f"PAUSE takes effect are dropped; set headroom_bytes >= {nd:,}"))
    return out


def _buffer_warnings(fabric, links, have, cfg) -> list[HeadroomWarning]:
    """Switches whose buffer cannot hold the headroom of all their lossless ingress ports."""
    dst = np.asarray(fabric.link_dst, dtype=np.int64)[links]
    total: dict[int, int] = defaultdict(int)
    count: dict[int, int] = defaultdict(int)
    for d, h in zip(dst.tolist(), have.tolist(), strict=True):
        total[d] += int(h)
        count[d] += 1
    short: dict[tuple[int, int], list[str]] = defaultdict(list)
    for d, t in total.items():
        if t > cfg.buffer_bytes:
            short[(count[d], t)].append(fabric.nodes[d])
    out = []
    for (n, t), names in sorted(short.items(), key=lambda kv: -kv[0][1]):
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(HeadroomWarning(
            "buffer", shown, n, int(cfg.buffer_bytes), t,
            f"{'switches' if len(names) > 1 else 'switch'} {shown}: {n} lossless ingress ports "
            f"need {t:,} B of PFC headroom in all, more than the {cfg.buffer_bytes:,} B buffer "
            f"{'of each' if len(names) > 1 else 'of the switch'}: once paused ports fill it, "
            f"packets of ports not yet paused are dropped; give it a buffer of at least {t:,} B"))
    return out
