"""Unit constants and conversions: the only module that converts units.

Simulated time is integer picoseconds (``_ps``); a 4,096-byte packet at 400 Gb/s takes
81,920 ps exactly, where whole nanoseconds would drift by 0.1% per packet.
"""

from __future__ import annotations

import re

PS_PER_NS = 1_000
PS_PER_US = 1_000_000
PS_PER_MS = 1_000_000_000
PS_PER_S = 1_000_000_000_000
NS_PER_S = 1_000_000_000

KB = 1_000
MB = 1_000_000
GB = 1_000_000_000
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

GBPS = 1_000_000_000  # bits per second in one Gb/s


def gbps(x: float) -> int:
    """Gb/s -> bit/s (integer)."""
    return int(round(x * GBPS))


def ns_to_ps(ns: float) -> int:
    return int(round(ns * PS_PER_NS))


def us_to_ps(us: float) -> int:
    return int(round(us * PS_PER_US))


def s_to_ps(s: float) -> int:
    return int(round(s * PS_PER_S))


def ps_to_s(ps: int) -> float:
    return ps / PS_PER_S


def ps_to_ns(ps: int) -> float:
    return ps / PS_PER_NS


def serialization_ps(nbytes: int, rate_bps: int) -> int:
    """Time to put ``nbytes`` on a wire of ``rate_bps``, in integer picoseconds (floor)."""
    return (nbytes * 8 * PS_PER_S) // rate_bps


_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": KB, "kb": KB, "m": MB, "mb": MB, "g": GB, "gb": GB, "t": 1000 * GB, "tb": 1000 * GB,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": 1 << 40,
}


def parse_bytes(text: str | int) -> int:
    """Parse a byte count such as ``4096``, ``2MB``, ``1GiB`` or ``1.5 KiB``.

    Decimal suffixes (KB, MB, GB) are powers of 1000, binary ones (KiB, MiB, GiB) powers of 1024.

    >>> parse_bytes("1GiB"), parse_bytes("2MB"), parse_bytes(64)
    (1073741824, 2000000, 64)
    """
    if isinstance(text, int):
        value = text
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if not m or m.group(2).lower() not in _SIZE_UNITS:
            raise ValueError(f"cannot parse byte count {text!r}: use e.g. 4096, 2MB, 1GiB")
        value = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
        if value != int(value):
            raise ValueError(f"byte count {text!r} is not a whole number of bytes")
        value = int(value)
    if value < 0:
        raise ValueError(f"byte count {text!r} must not be negative")
    return value


_NCCL_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_nccl_size(text: str | int) -> int:
    """A size as nccl-tests' ``-b``/``-e`` read it: K, M and G are powers of 1024.

    nccl-tests (``src/common.cu``, ``parsesize``: "We use the binary system, so M=Mebibytes
    and G=Gibibytes") scans a number and then one letter, so ``8M``, ``8MB`` and ``8MiB`` all
    mean 8 MiB; a bare number is bytes.

    >>> parse_nccl_size("8M"), parse_nccl_size("8MB"), parse_nccl_size("1G"), parse_nccl_size(64)
    (8388608, 8388608, 1073741824, 64)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KkMmGg]?)(?:i?[Bb])?\s*",
                         str(text))
        if not m:
            raise ValueError(f"cannot parse size {text!r} as nccl-tests does: use e.g. 8, 64K, "
                             "8M, 1G (powers of 1024)")
        value = int(float(m.group(1)) * _NCCL_UNITS[m.group(2).lower()])  # C cast: truncates
    if value < 0:
        raise ValueError(f"size {text!r} must not be negative")
    return value


_TIME_UNITS_PS = {"ps": 1, "ns": PS_PER_NS, "us": PS_PER_US, "ms": PS_PER_MS, "s": PS_PER_S,
                  "min": 60 * PS_PER_S}


def parse_duration_ps(text: str | int) -> int:
    """Parse a duration such as ``5s``, ``300us``, ``2.5ms`` or ``81920ps`` into picoseconds.

    A bare number is seconds.

    >>> parse_duration_ps("300us"), parse_duration_ps("5s") == 5 * PS_PER_S
    (300000000, True)
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-z]*)\s*", str(text))
    if not m or m.group(2) not in {**_TIME_UNITS_PS, "": PS_PER_S}:
        raise ValueError(f"cannot parse duration {text!r}: use e.g. 5s, 300us, 2.5ms")
    unit = _TIME_UNITS_PS.get(m.group(2), PS_PER_S)
    return int(round(float(m.group(1)) * unit))
