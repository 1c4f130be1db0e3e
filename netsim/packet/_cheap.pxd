# The compiled build's event heap (netsim/packet/_cheap.pyx); cimported by engine.pxd.

cdef struct Node:
    long long t
    long long hi
    long long lo
    Py_ssize_t slot  # the entry's Python object in CHeap.refs, or -1 (a port wake has none)
    Py_ssize_t lk
    int kind  # GENERIC (a tuple), WAKE (port lk) or ARRIVAL (a packet on link lk)

cdef enum:
    GENERIC = 0
    WAKE = 1
    ARRIVAL = 2

cdef class CHeap:
    cdef Node *a
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    cdef list refs
    cdef Py_ssize_t *free
    cdef Py_ssize_t nfree
    cdef Py_ssize_t free_cap
    cdef Node top
    cdef public long long events
    cpdef push(self, tuple e)
    cdef int push_at(self, long long t, long long hi, long long lo, tuple e) except -1
    cdef int push_wake(self, long long t, long long lo, Py_ssize_t lk) except -1
    cdef int push_arrival(self, long long t, long long hi, long long lo, Py_ssize_t lk,
                          object pkt) except -1
    cdef int _insert(self, Node node, object ref) except -1
    cdef int pop_top(self) except -1
    cdef object take(self)
    cdef int source(self, list q, long long until_ps) except -1
