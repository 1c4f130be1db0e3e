# The compiled build's event heap (netsim/packet/_cheap.pyx); cimported by engine.pxd.
from cpython.ref cimport PyObject

cdef struct Node:
    long long t
    long long hi
    long long lo
    PyObject *e

cdef class CHeap:
    cdef Node *a
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    cdef public long long events
    cpdef push(self, tuple e)
    cdef object pop(self)
