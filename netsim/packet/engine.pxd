# Cython declarations for the compiled build of engine.py (pure-Python mode, see setup.py).
from netsim.packet.qp cimport Pkt, QP
from netsim.packet._cheap cimport CHeap


cdef class _Fabric:
    cdef list q
    cdef object eid
    cdef list L_up
    cdef long long[:] L_dst
    cdef long long[:] L_rate
    cdef long long[:] L_prop
    cdef long long[:] L_nic
    cdef long long[:] L_tie
    cdef list L_fly
    cdef long long[:] P_busy
    cdef long long[:] P_wake
    cdef list P_ctrl
    cdef list P_data
    cdef long long[:] P_qb
    cdef long long[:] P_qmax
    cdef list P_paused
    cdef long long[:] P_txb
    cdef long long[:] P_ecn
    cdef long long[:] I_bytes
    cdef list I_xoff
    cdef long long[:] I_level
    cdef long long[:] I_hr_max
    cdef long long[:] S_used
    cdef list N_xoff
    cdef list headroom
    cdef CHeap hq
    cdef bint cheap
    cdef long long tie_mask
    cdef long long PS_BITS
    cdef unsigned long long TIE_MUL
    cdef bint ack_qp, fast, pfc, ecn, ecn_deq, cnp_prio, static, cnps
    cdef double buffer, alpha, xoff_fixed, kmin, kmax, pmax
    cdef list I_out_ps
    cdef long long xon_off
    cdef object send_resume
    cdef object lost, uniform, drop_admit, send_pause, cnp_from, rx_ctrl
    cdef object wake, arrive, nic_send, rx_data


cdef inline void _kick(_Fabric f, Py_ssize_t lk, long long t)
cdef inline void _wake(_Fabric f, long long t, Py_ssize_t lk)
cdef inline long long _tx(_Fabric f, long long t, Py_ssize_t lk, Pkt pkt)
cdef inline void _launch(_Fabric f, Py_ssize_t lk, Pkt pkt, long long ta)
cdef void _serve(_Fabric f, long long t, Py_ssize_t lk)
cdef inline void _serve_ctrl(_Fabric f, long long t, Py_ssize_t lk, ctrl)
cdef inline void _serve_data(_Fabric f, long long t, Py_ssize_t lk)
cdef void _release(_Fabric f, long long t, Pkt pkt)
cdef inline void _red_mark(_Fabric f, long long qb, Pkt pkt, Py_ssize_t lk)
cdef inline double _xoff_at(_Fabric f, long long used) noexcept
cdef void _arrive(_Fabric f, long long t, Py_ssize_t lk, Pkt pkt)
cpdef _run_compiled(_Fabric f, list q, env, long long until_ps)
cdef inline void _forward_ctrl(_Fabric f, long long t, Py_ssize_t nl, Pkt pkt)
cdef inline bint _cut_through(_Fabric f, long long t, Py_ssize_t lk, Py_ssize_t nl, Pkt pkt)
cdef inline void _enqueue(_Fabric f, long long t, Py_ssize_t lk, Py_ssize_t nl, Pkt pkt)
cdef inline bint _pfc_ingress(_Fabric f, long long t, Py_ssize_t lk, Py_ssize_t nl, Pkt pkt,
                              bint xoff, double thr)
