# Cython declarations for the compiled build of qp.py (pure-Python mode, see setup.py): the
# packet and QP records become extension types with C fields. Plain Python ignores this file.

cdef class Pkt:
    cdef public int kind
    cdef public object qp
    cdef public long long psn
    cdef public long long size
    cdef public object route
    cdef public Py_ssize_t hop
    cdef public object ecn
    cdef public object t_sent
    cdef public Py_ssize_t inl
    cdef public bint areq
    cdef public long long ta, tkey, teid


cdef class QP:
    cdef public Py_ssize_t idx
    cdef public Py_ssize_t flow
    cdef public Py_ssize_t nic
    cdef public Py_ssize_t port
    cdef public Py_ssize_t rport
    cdef public object fwd
    cdef public object rev
    cdef public long long npkts
    cdef public long long last_payload
    cdef public long long snd_nxt
    cdef public long long snd_una
    cdef public long long max_sent
    cdef public object cc
    cdef public long long next_ok
    cdef public long long deadline
    cdef public bint timer_on
    cdef public long long retries
    cdef public object progress_t
    cdef public object adapt_base
    cdef public bint error
    cdef public bint done
    cdef public long long rx_next
    cdef public long long rx_unacked
    cdef public object rx_ecn
    cdef public bint rx_nacked
    cdef public bint rx_dup_acked
    cdef public object rx_done_ps
    cdef public object tx_done_ps
    cdef public long long retx_pkts
    cdef public long long retx_bytes
    cdef public long long timeouts
    cdef public object payload_bytes
    cdef public object sport
    cdef public long long ctrl_lat
    cdef public long long last_tx
    cdef public long long last_wire


cdef class _Nic:
    cdef object sim, tx, kick, serve
    cdef list nic_active
    cdef long long[:] L_nic
    cdef long long[:] P_busy
    cdef list P_commit
    cdef long long[:] P_pause_eff
    cdef long long[:] nic_rr
    cdef list P_ctrl
    cdef long long[:] L_rev
    cdef list L_fly
    cdef list P_due
    cdef long long[:] P_ctrl_min
    cdef list P_rxgap
    cdef long long mtu, hdr, ack_every, ctrl_size
    cdef object rto, eid, rto_for, env, cnp_gen, ctrl_arrive
    cdef list q
    cdef list flow_dlv
    cdef bint ctrl_per_hop, ack_qp, cnp_prio, cheap


cdef void _nic_send(_Nic n, long long t, Py_ssize_t lk)
cdef inline long long _commit_limit(_Nic n, long long t, Py_ssize_t lk)
cdef inline bint _window_full(QP qp, long long mtu)
cdef inline long long _soonest(list qps, long long mtu)
cdef inline object _pick(_Nic n, long long t, Py_ssize_t lk, list qps)
cdef long long _nic_one(_Nic n, long long t, Py_ssize_t lk, list qps)
cdef inline Pkt _data_pkt(_Nic n, long long t, Py_ssize_t lk, QP qp)
cdef inline void _pace(_Nic n, long long t, QP qp, long long size)
cdef void _rx_data(_Nic n, long long t, Pkt pkt)
cdef inline void _rx_in_order(_Nic n, long long t, QP qp, Pkt pkt)
cdef void _rx_ctrl(_Nic n, long long t, Pkt pkt)
cdef void _acked(_Nic n, long long t, QP qp, Pkt pkt, long long psn)
cdef void _send_ctrl(_Nic n, long long t, QP qp, int kind, psn, ecn, t_sent)
