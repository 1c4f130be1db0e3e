"""Flow-level engine: ECMP-routed flows sharing links max-min fairly, DCQCN-aware, or PFC-aware.

Public API::

    from netsim.flow import simulate_flows, simulate_paths, FlowResult, SharingModel, maxmin_rates

See ``docs/flow-engine.md`` for the model and its limits.
"""

from netsim.flow.engine import FlowResult, simulate_flows, simulate_paths
from netsim.flow.maxmin import Incidence, link_load, maxmin_rates
from netsim.flow.sharing import MODELS, SharingModel, make_model

__all__ = ["FlowResult", "Incidence", "MODELS", "SharingModel", "link_load", "make_model",
           "maxmin_rates", "simulate_flows", "simulate_paths"]
