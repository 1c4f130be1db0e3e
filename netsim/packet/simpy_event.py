"""One simpy event popped from the packet engine's shared heap, run as simpy itself would.

The engine's loops (``engine.PacketSim.run`` and the compiled ``engine._run_compiled``) pop their
own ``(t, eid, fn, a, b)`` entries and, rarely, a genuine simpy event (a process step, a
timeout) that shares the heap; :func:`fire` runs the latter like ``simpy.Environment.step``.
"""

from __future__ import annotations


def fire(ev) -> None:
    """Run *ev*'s callbacks; re-raise its failure unless it was defused (simpy's rule)."""
    callbacks, ev.callbacks = ev.callbacks, None
    for cb in callbacks:
        cb(ev)
    if not ev._ok and not hasattr(ev, "_defused"):
        raise ev._value from None
