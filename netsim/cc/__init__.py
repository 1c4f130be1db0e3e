"""Congestion control per QP: ``none``, DCQCN, Swift and a DCQCN+Swift hybrid.

The packet engine uses only :func:`make_cc`, :class:`CnpGenerator` and
:class:`EcnParams` (``mark_probability``); the interface is documented in
:mod:`netsim.cc.base` and ``docs/congestion-control.md``.
"""

from netsim.cc.base import CC_NAMES, Clock, CnpGenerator, CongestionControl, make_cc
from netsim.cc.params import (
    DcqcnParams,
    EcnParams,
    HybridParams,
    SwiftParams,
    params_for,
    parse_cc_params,
)

# The algorithms register themselves with the factory (netsim.cc.base.register); importing
# them here, and nowhere in base, keeps the registry free of imports of its subclasses.
from netsim.cc import dcqcn, hybrid, nocc, swift  # noqa: E402,F401  isort: skip

__all__ = [
    "CC_NAMES", "Clock", "CnpGenerator", "CongestionControl", "make_cc",
    "DcqcnParams", "EcnParams", "HybridParams", "SwiftParams", "params_for", "parse_cc_params",
]
