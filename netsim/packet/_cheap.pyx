# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled build's event heap for the packet engine's hot path (``setup.py``).

The plain path keeps every event on simpy's heap (``Environment._queue``, a list of tuples
ordered by ``heapq``). Comparing tuples reads every entry on the sift path, which dominated
the compiled engine's profile; this heap keeps the sort keys in a C array, so a sift moves
structs and touches no Python object. Only the hot path's own events go here, as C records: a
port wake is ``(t, 0, eid, port)`` with no Python object at all, a link arrival
``(t, tie + 1, eid, link)`` and its packet (the packet holds its own key while it waits behind
others on the link); everything else (simpy events, timers, control packets, faults) stays on
simpy's heap. The engine's loop (``engine._run_compiled``) merges the two with :meth:`source`
and calls its handlers directly.

Same order as the plain path: there, an entry sorts by ``(t, key)`` with ``key = eid`` for a
wake and ``key = (tie + 1) << 40 | eid`` for an arrival; here by ``(t, hi, lo)`` =
``(t, 0 or tie + 1, eid)``, the same order while event ids stay below 2**40 (checked). Keys are
unique (every entry has its own eid), so any correct priority queue pops them in one order.
"""

from libc.stdlib cimport free, malloc, realloc

cdef long long _LO_LIMIT = 1LL << 40


cdef inline bint _less(Node *x, Node *y) noexcept nogil:
    if x.t != y.t:
        return x.t < y.t
    if x.hi != y.hi:
        return x.hi < y.hi
    return x.lo < y.lo


cdef class CHeap:
    """A binary min-heap of events keyed by ``(t, hi, lo)``: port wakes, packet arrivals
    (:meth:`push_wake`, :meth:`push_arrival`) and tuples ``(t, hi, lo, fn, a, b)``.

    The keys live in a C array; an entry's Python object (packet or tuple) in a Python list at
    a fixed slot (``refs``), so the garbage collector sees it (a packet refers back to the
    simulator through its QP: a simulator left with pending events is a reference cycle it
    must be able to free).
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
        """Push a tuple entry ``(t, hi, lo, fn, a, b)``; the loop calls ``fn(t, a, b)``."""
        self.push_at(e[0], e[1], e[2], e)

    cdef int push_at(self, long long t, long long hi, long long lo, tuple e) except -1:
        """Push the tuple *e*, whose first three items are *t*, *hi*, *lo*."""
        cdef Node node
        node.t, node.hi, node.lo, node.lk, node.kind = t, hi, lo, 0, GENERIC
        return self._insert(node, e)

    cdef int push_wake(self, long long t, long long lo, Py_ssize_t lk) except -1:
        """The wake of port *lk* at *t* (key ``(t, 0, lo)``): no Python object at all."""
        cdef Node node
        node.t, node.hi, node.lo, node.lk, node.kind = t, 0, lo, lk, WAKE
        return self._insert(node, None)

    cdef int push_arrival(self, long long t, long long hi, long long lo, Py_ssize_t lk,
                          object pkt) except -1:
        """The arrival of *pkt* over link *lk* at *t* (key ``(t, hi, lo)``, hi = tie + 1)."""
        cdef Node node
        node.t, node.hi, node.lo, node.lk, node.kind = t, hi, lo, lk, ARRIVAL
        return self._insert(node, pkt)

    cdef int _insert(self, Node node, object ref) except -1:
        cdef Node *grown
        cdef Py_ssize_t i, p
        if node.lo >= _LO_LIMIT or node.hi < 0 or node.lo < 0:
            raise OverflowError("event id or tie key outside the compiled heap's range")
        if self.n == self.cap:
            grown = <Node *> realloc(self.a, 2 * self.cap * sizeof(Node))
            if grown == NULL:
                raise MemoryError()
            self.a = grown
            self.cap *= 2
        if ref is None:
            node.slot = -1
        elif self.nfree:
            self.nfree -= 1
            node.slot = self.free[self.nfree]
            self.refs[node.slot] = ref
        else:
            node.slot = len(self.refs)
            self.refs.append(ref)
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
        return 0

    cdef int pop_top(self) except -1:
        """Remove the smallest entry (the heap must not be empty) into ``self.top``; its
        kind. Its Python object, if any, is then :meth:`take`'s."""
        cdef Node last
        cdef Py_ssize_t i, c, n
        self.top = self.a[0]
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
        return self.top.kind

    cdef object take(self):
        """The Python object of the entry :meth:`pop_top` removed (its slot is freed)."""
        cdef Py_ssize_t *grown
        cdef Py_ssize_t slot = self.top.slot
        e = self.refs[slot]
        self.refs[slot] = None
        if self.nfree == self.free_cap:
            grown = <Py_ssize_t *> realloc(self.free, 2 * self.free_cap * sizeof(Py_ssize_t))
            if grown == NULL:
                raise MemoryError()
            self.free = grown
            self.free_cap *= 2
        self.free[self.nfree] = slot
        self.nfree += 1
        return e

    def peek_time(self):
        """Time of the smallest entry (None if empty)."""
        return self.a[0].t if self.n else None

    cdef int source(self, list q, long long until_ps) except -1:
        """Where the next event comes from, in the plain path's order: 1 simpy's heap *q*,
        2 this heap, 0 none before *until_ps* (or both empty)."""
        cdef Node *top
        cdef long long lt
        if q:
            item = q[0]
            if self.n == 0:
                return 0 if item[0] > until_ps else 1
            top = &self.a[0]
            lt = item[0]
            if lt != top.t:
                if lt < top.t:
                    return 0 if lt > until_ps else 1
            elif item[1] < ((<object> top.hi) << 40 | top.lo):  # the plain path's key order
                return 0 if lt > until_ps else 1
        elif self.n == 0:
            return 0
        return 0 if self.a[0].t > until_ps else 2
