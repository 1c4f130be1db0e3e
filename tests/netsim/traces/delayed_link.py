"""A delayed link between the ranks of one gloo process group, for the plain-torch test jobs.

``register(delay_s)`` adds a torch.distributed backend ``delayed_gloo``: a ``ProcessGroupGloo``
whose members read, in place of each peer's gloo listener address, the address of a TCP relay
(``link_relay.py``, a process of its own: gloo connects while holding
the interpreter lock) that forwards every byte, in both directions, ``delay_s`` after it
arrived (added latency; the bandwidth is the loopback's). Every message on the group's
connections is late by ``delay_s``, so both members' ``gloo:*`` spans of each call grow, as
they do behind a slow link; the calls, their operators and the profiler's records are
PyTorch's own. Other groups (plain ``gloo``) are untouched.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import torch.distributed as dist

BACKEND = "delayed_gloo"
RELAY = Path(__file__).resolve().parent / "link_relay.py"
_LOOPBACK = re.compile(rb"\x02\x00(..)\x7f\x00\x00\x01", re.S)
"""An IPv4 ``sockaddr_in`` on 127.0.0.1 in gloo's published device address (family, port)."""


_RELAYS: list[subprocess.Popen] = []


def _orders(port: int) -> tuple[int, int]:
    """The two ways a port field may be compared: as the port, and as its two bytes read in
    the host's (little-endian) order."""
    return port, ((port & 0xFF) << 8) | (port >> 8)


def same_side(self_port: int, peer_port: int, relay_port: int) -> bool:
    """Whether ``relay_port`` compares with ``self_port`` as ``peer_port`` does, both ways: a
    gloo pair's connecting side is chosen by comparing the two addresses, and both members
    must agree."""
    return all((s < p) == (s < r) and p != s and r != s
               for s, p, r in zip(_orders(self_port), _orders(peer_port), _orders(relay_port),
                                  strict=True))


def _relay(self_port: int, peer_port: int, delay_s: float) -> int:
    """A relay process to 127.0.0.1:``peer_port`` on a port on the same side of ``self_port``
    as the peer's; returns its port."""
    for k in (k * sign for k in range(1, 200) for sign in (1, -1)):
        port = peer_port + 257 * k
        if not 1024 <= port < 65536 or not same_side(self_port, peer_port, port):
            continue
        proc = subprocess.Popen([sys.executable, str(RELAY), str(peer_port), repr(delay_s),
                                 str(port)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if proc.stdout.readline().strip() == str(port):
            _RELAYS.append(proc)
            return port
        proc.wait()
    raise RuntimeError(f"delayed_gloo: no free relay port for {peer_port}")


class RelayedStore(dist.Store):
    """A store through which a member of a gloo group reads its peers' device addresses with a
    delaying relay in their place (its own address it publishes as it is)."""

    def __init__(self, inner: dist.Store, delay_s: float) -> None:
        super().__init__()
        self.inner, self.delay_s, self.relayed = inner, delay_s, 0
        self.own_port: int | None = None

    def set(self, key: str, value) -> None:
        m = _LOOPBACK.search(bytes(value))
        if m is not None:
            self.own_port = int.from_bytes(m.group(1), "big")
        self.inner.set(key, value)

    def get(self, key: str) -> bytes:
        raw = bytes(self.inner.get(key))
        m = _LOOPBACK.search(raw)
        peer = int.from_bytes(m.group(1), "big") if m else None
        if peer is None or self.own_port is None or peer == self.own_port:
            return raw
        port = _relay(self.own_port, peer, self.delay_s)
        self.relayed += 1
        return raw[:m.start(1)] + port.to_bytes(2, "big") + raw[m.end(1):]

    def add(self, key: str, amount: int) -> int:
        return self.inner.add(key, amount)

    def wait(self, keys, timeout=None) -> None:
        self.inner.wait(keys) if timeout is None else self.inner.wait(keys, timeout)

    def check(self, keys) -> bool:
        return self.inner.check(keys)

    def compare_set(self, key: str, expected, desired) -> bytes:
        return self.inner.compare_set(key, expected, desired)

    def delete_key(self, key: str) -> bool:
        return self.inner.delete_key(key)

    def num_keys(self) -> int:
        return self.inner.num_keys()

    def set_timeout(self, timeout) -> None:
        self.inner.set_timeout(timeout)


def register(delay_s: float) -> None:
    """Make ``dist.new_group(ranks, backend=BACKEND)`` a gloo group on delayed links."""

    def create(store, rank, size, timeout):
        relayed = RelayedStore(store, delay_s)
        pg = dist.ProcessGroupGloo(relayed, rank, size, timeout)
        if not relayed.relayed:
            raise RuntimeError("delayed_gloo: no 127.0.0.1 gloo address was published "
                               "(set GLOO_SOCKET_IFNAME=lo)")
        return pg

    dist.Backend.register_backend(BACKEND, create, devices=["cpu"])
