# The compiled build's event heap (netsim/packet/_cheap.pyx); cimported by engine.pxd.

cdef struct Node:
    long long t
    long long hi
    long long lo
    Py_ssize_t slot

cdef class CHeap:
    cdef Node *a
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    cdef list refs
    cdef Py_ssize_t *free
    cdef Py_ssize_t nfree
    cdef Py_ssize_t free_cap
    cdef public long long events
    cpdef push(self, tuple e)
    cdef push_at(self, long long t, long long hi, long long lo, tuple e)
    cdef object pop(self)
