# Cython declarations for the compiled build of engine.py (pure-Python mode, see setup.py).
from netsim.packet.qp cimport Pkt, QP
from netsim.packet._cheap cimport CHeap
