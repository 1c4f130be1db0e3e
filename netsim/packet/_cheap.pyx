# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled build's event heap for the packet engine's hot path (``setup.py``).

The plain path keeps every event on simpy's heap (``Environment._queue``, a list of tuples
ordered by ``heapq``). Comparing tuples reads every entry on the sift path, which dominated
the compiled engine's profile; this heap keeps the sort keys in a C array, so a sift moves
structs and touches no Python object. Only the hot path's own events go here: port wakes
``(t, 0, eid, fn, a, b)`` and link arrivals ``(t, tie + 1, eid, fn, a, b)``; everything else
(simpy events, timers, control packets, faults) stays on simpy's heap, and :func:`run_loop`
merges the two.

Same order as the plain path: there, an entry sorts by ``(t, key)`` with ``key = eid`` for a
wake and ``key = (tie + 1) << 40 | eid`` for an arrival; here by ``(t, hi, lo)`` =
``(t, 0 or tie + 1, eid)``, the same order while event ids stay below 2**40 (checked). Keys are
unique (every entry has its own eid), so any correct priority queue pops them in one order.
"""

from heapq import heappop

from netsim.packet.simpy_event import fire as fire_simpy
from libc.stdlib cimport free, malloc, realloc

cdef long long _LO_LIMIT = 1LL << 40


cdef inline bint _less(Node *x, Node *y) noexcept nogil:
    if x.t != y.t:
        return x.t < y.t
    if x.hi != y.hi:
        return x.hi < y.hi
    return x.lo < y.lo


cdef class CHeap:
    """A binary min-heap of 6-tuples ``(t, hi, lo, fn, a, b)`` keyed by ``(t, hi, lo)``.

    The keys live in a C array; the entries in a Python list at fixed slots (``refs``), so the
    garbage collector sees them (an entry refers back to the simulator through its callback:
    a simulator left with pending events is a reference cycle it must be able to free).
    """

    def __cinit__(self):
        self.cap = 1024
        self.n = 0
        self.events = 0
        self.refs = []
        self.nfree = 0
        self.free_cap = 1024
        self.a = <Node *> malloc(self.cap * sizeof(Node))
        self.free = <Py_ssize_t *> malloc(self.free_cap * sizeof(Py_ssize_t))
        if self.a == NULL or self.free == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.a)
        free(self.free)

    def __len__(self):
        return self.n

    cpdef push(self, tuple e):
        self.push_at(e[0], e[1], e[2], e)

    cdef push_at(self, long long t, long long hi, long long lo, tuple e):
        """Push *e*, whose first three items are *t*, *hi*, *lo* (the caller has them as C
        integers: no unboxing)."""
        cdef Node node
        cdef Node *grown
        cdef Py_ssize_t i, p
        node.t = t
        node.hi = hi
        node.lo = lo
        if node.lo >= _LO_LIMIT or node.hi < 0 or node.lo < 0:
            raise OverflowError("event id or tie key outside the compiled heap's range")
        if self.n == self.cap:
            grown = <Node *> realloc(self.a, 2 * self.cap * sizeof(Node))
            if grown == NULL:
                raise MemoryError()
            self.a = grown
            self.cap *= 2
        if self.nfree:
            self.nfree -= 1
            node.slot = self.free[self.nfree]
            self.refs[node.slot] = e
        else:
            node.slot = len(self.refs)
            self.refs.append(e)
        i = self.n
        self.n += 1
        while i > 0:
            p = (i - 1) >> 1
            if _less(&node, &self.a[p]):
                self.a[i] = self.a[p]
                i = p
            else:
                break
        self.a[i] = node

    cdef object pop(self):
        """Remove the smallest entry and return it (the heap must not be empty)."""
        cdef Node top = self.a[0]
        cdef Node last
        cdef Py_ssize_t i, c, n
        cdef Py_ssize_t *grown
        self.n -= 1
        n = self.n
        if n > 0:
            last = self.a[n]
            i = 0
            while True:
                c = 2 * i + 1
                if c >= n:
                    break
                if c + 1 < n and _less(&self.a[c + 1], &self.a[c]):
                    c += 1
                if _less(&self.a[c], &last):
                    self.a[i] = self.a[c]
                    i = c
                else:
                    break
            self.a[i] = last
        e = self.refs[top.slot]
        self.refs[top.slot] = None
        if self.nfree == self.free_cap:
            grown = <Py_ssize_t *> realloc(self.free, 2 * self.free_cap * sizeof(Py_ssize_t))
            if grown == NULL:
                raise MemoryError()
            self.free = grown
            self.free_cap *= 2
        self.free[self.nfree] = top.slot
        self.nfree += 1
        return e

    def peek_time(self):
        """Time of the smallest entry (None if empty)."""
        return self.a[0].t if self.n else None


def run_loop(CHeap hq, list q, env, long long until_ps):
    """The event loop of ``PacketSim.run`` over both heaps, in the plain path's order.

    Counts events in ``hq.events`` (also when a callback raises to end the run)."""
    cdef long long ht, lt
    cdef bint from_list
    cdef Node *top
    while True:
        if q:
            item = q[0]
            if hq.n == 0:
                from_list = True
            else:
                top = &hq.a[0]
                lt = item[0]
                if lt != top.t:
                    from_list = lt < top.t
                else:  # same time: the plain path's key order, as Python integers
                    from_list = item[1] < ((<object> top.hi) << 40 | top.lo)
        elif hq.n == 0:
            return
        else:
            from_list = False
        if from_list:
            if item[0] > until_ps:
                return
            heappop(q)
            hq.events += 1
            env._now = item[0]
            if len(item) == 4:  # a genuine simpy event (process, timeout) sharing the heap
                fire_simpy(item[3])
                continue
            t, _e, fn, a, b = item
            fn(t, a, b)
            continue
        ht = hq.a[0].t
        if ht > until_ps:
            return
        e = hq.pop()
        hq.events += 1
        t = e[0]
        env._now = t
        e[3](t, e[4], e[5])
