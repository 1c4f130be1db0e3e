"""The scenario families a CC setting is judged on: in-sample from the job, held out beside it.

A :class:`Family` is one scenario of the paired comparison: a congestion point of the job
(:func:`tuner.ccsearch.job_scenarios`) under one reading of the byte counter, and a rule that
draws a concrete packet run per seed (degree, flow size, start offsets). Candidate and
defaults run on the same draw, so a seed's pair differs only by the setting.

* :func:`in_sample` — what the search tunes on: each congestion point at its own degree and at
  3/4 of it, flows of 512 KB, 1 MB or 2 MB (NCCL moves a collective in chunks of this order:
  its Simple protocol's 4 MB buffer per channel in 8 slices of 512 KB), all at once or spread
  over one flow's time on the wire; both readings of ``rpg_byte_reset``'s unit.
* :func:`held_out` — what the search never sees, run only to confirm the chosen setting: other
  seeds, other sizes (256 KB and 4 MB) at other degrees (the point's own and half of it), and
  NIC incasts of 8:1 and 4:1 of 25 MB with every sender starting at once, under both readings.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tuner.ccrun import BUFFER_PER_PORT_BYTES, BYTE_COUNTER_READINGS, HotSpot

#: Paired samples per scenario: seeds ``seed .. seed + SAMPLES - 1`` in sample.
SAMPLES = 5
#: Held-out seeds start here above the search's seed (disjoint from the in-sample seeds).
HELD_OUT_SEED_OFFSET = 1000
IN_SAMPLE_SIZES_BYTES = (512_000, 1_000_000, 2_000_000)
#: Start offsets, in units of one flow's time on the wire at the NIC rate: 0 = all at once.
START_SPREADS = (0.0, 1.0)
HELD_OUT_INCASTS = ((8, 25_000_000), (4, 25_000_000))


@dataclass(frozen=True)
class Family:
    """One scenario of the comparison: a congestion point and how a seed draws its run."""

    name: str
    base: HotSpot
    degrees: tuple[int, ...]
    sizes_bytes: tuple[int, ...]
    spreads: tuple[float, ...] = START_SPREADS

    def sample(self, seed: int) -> HotSpot:
        """The packet run of this family for *seed* (the same for every setting)."""
        rng = np.random.default_rng([int(seed), 0x26])
        n = int(rng.choice(self.degrees))
        size = int(rng.choice(self.sizes_bytes))
        spread = float(rng.choice(self.spreads))
        wire_ps = size * 8 / (self.base.nic_gbps * 1e9) * 1e12
        return dataclasses.replace(self.base, senders=n, flow_bytes=size,
                                   buffer_bytes=BUFFER_PER_PORT_BYTES * (n + 1),
                                   start_spread_ps=int(spread * wire_ps), source=self.name)


def _reading(name: str, unit: int) -> str:
    return f"{name} [rpg_byte_reset in {int(unit)} B units]"


def _under(hot: HotSpot, name: str, degrees, sizes, readings, spreads=START_SPREADS):
    return [Family(_reading(name, u), dataclasses.replace(hot, byte_unit_bytes=int(u)),
                   tuple(int(d) for d in degrees), tuple(sizes), tuple(spreads))
            for u in readings]


def in_sample(points: list[HotSpot], readings=BYTE_COUNTER_READINGS) -> list[Family]:
    """The search's families: each congestion point at its degree and 3/4 of it, in-sample sizes."""
    out = []
    for hot in points:
        degrees = sorted({hot.senders, max(2, round(0.75 * hot.senders))}, reverse=True)
        out += _under(hot, hot.source, degrees, IN_SAMPLE_SIZES_BYTES, readings)
    return out


def held_out(points: list[HotSpot], readings=BYTE_COUNTER_READINGS) -> list[Family]:
    """Families the search never runs: other sizes and degrees, and 8:1 / 4:1 NIC incasts."""
    out = []
    for hot in points:
        out += _under(hot, f"held out: {hot.source}, 256 KB flows", (hot.senders,),
                      (256_000,), readings)
        half = max(2, hot.senders // 2)
        out += _under(hot, f"held out: {half} of its {hot.senders} QPs, 4 MB flows", (half,),
                      (4_000_000,), readings)
    if points:
        nic = points[0].nic_gbps
        for n, size in HELD_OUT_INCASTS:
            inc = HotSpot("incast", n, nic, nic, size, BUFFER_PER_PORT_BYTES * (n + 1),
                          f"held out: {n}:1 incast of {size / 1e6:g} MB at the {nic:g}G NIC")
            # all senders at once: a collective's incast starts in lockstep (its worst case)
            out += _under(inc, inc.source, (n,), (size,), readings, spreads=(0.0,))
    return out


def in_sample_seeds(seed: int, n: int = SAMPLES) -> tuple[int, ...]:
    return tuple(range(int(seed), int(seed) + n))


def held_out_seeds(seed: int, n: int = SAMPLES) -> tuple[int, ...]:
    return tuple(range(int(seed) + HELD_OUT_SEED_OFFSET, int(seed) + HELD_OUT_SEED_OFFSET + n))
