"""MFU of GPT-3 175B from 256 to 12,288 GPUs on the MegaScale fabric: the study's sweep point.

:func:`mfu_point` predicts one iteration (``netsim.workload.predict``, collectives on the fabric
with the flow engine, ``netsim.workload.FlowCommModel``) for one scale, one overlap setting and
one network what-if, on MegaScale's schedule (six interleaved virtual stages unless
``virtual_stages`` says otherwise), and returns its MFU, iteration time and exposed communication.

Overlaps (``netsim.workload.Overlap``): ``none`` (Megatron-LM defaults), one of
``dp_grad_reduce``, ``dp_param_gather``, ``pp_send_recv``, ``tp_comm`` alone, or ``all``
(``Overlap.megascale()``).

Network what-ifs:

``base``          the ``megascale`` preset (1:1 at every tier, 200G NICs);
``nic_x0.5``,     every network link at half / twice its bandwidth (``predict --nic-scale``);
``nic_x2``
``agg_2to1``      the aggregation-to-core links at half bandwidth: 2:1 oversubscription at the
                  aggregation tier;
``spine_down``    one core (spine) switch failed: ECMP hashes around all of its links.
"""

from __future__ import annotations

import copy
import functools

import numpy as np

OVERLAPS = ("none", "dp_grad_reduce", "dp_param_gather", "pp_send_recv", "tp_comm", "all")
NETWORKS = ("base", "nic_x0.5", "nic_x2", "agg_2to1", "spine_down")
GLOBAL_BATCH = 6144  # the 12,288-GPU configuration (experiments/published), kept at every scale
#: MegaScale's schedule: interleaved 1F1B with six virtual stages per pipeline stage for the 175B
#: model (arXiv:2402.15627 section 6.1; ``experiments.scale_mfu.megascale_tables``)
VIRTUAL_STAGES = 6


@functools.lru_cache(maxsize=2)
def _megascale():
    from topologies import load_fabric

    return load_fabric("megascale")


def _fabric(network: str):
    """The fabric of a what-if and the directed links that are down."""
    f = _megascale()
    if network in ("base", "nic_x0.5", "nic_x2"):
        return f, ()
    if network == "agg_2to1":
        out = copy.copy(f)
        cap = np.asarray(f.link_capacity_bps, dtype=np.float64).copy()
        cap[np.asarray(f.link_kind).astype(str) == "agg-core"] *= 0.5
        out.link_capacity_bps = cap.astype(np.asarray(f.link_capacity_bps).dtype)
        return out, ()
    if network == "spine_down":
        names = list(f.nodes)
        core = names.index(next(n for n in names if n.startswith("core")))
        links = np.flatnonzero((np.asarray(f.link_src) == core) | (np.asarray(f.link_dst) == core))
        return f, tuple(int(x) for x in links)
    raise ValueError(f"network {network!r}: choose one of {', '.join(NETWORKS)}")


def _overlap(name: str):
    from netsim.workload import Overlap

    if name == "none":
        return Overlap()
    if name == "all":
        return Overlap.megascale()
    if name not in OVERLAPS:
        raise ValueError(f"overlap {name!r}: choose one of {', '.join(OVERLAPS)}")
    return Overlap(**{name: True})


def _comm_model(fabric, hw, failed: tuple[int, ...], seed: int):
    from netsim.workload import FlowCommModel

    model = FlowCommModel(fabric, hw, seed=seed)
    if failed:  # ECMP around the failed switch: the router of the model's paths
        from netsim.flow.paths import FabricPaths
        from topologies.routing import Router

        model._paths = FabricPaths(model.fabric, Router(model.fabric, seed=seed,
                                                        failed_links=failed))
    return model


def mfu_point(gpus: int, overlap: str, network: str, seed: int = 0,
              model: str = "gpt3-175b", tp: int = 8, pp: int = 8,
              global_batch: int = GLOBAL_BATCH, distributed_optimizer: bool = True,
              virtual_stages: int = VIRTUAL_STAGES) -> dict:
    """Predicted iteration of ``model`` on ``gpus`` GPUs of the megascale fabric."""
    from netsim.model.hardware import get_hardware
    from netsim.workload import JobSpec, predict

    fabric, failed = _fabric(network)
    hw = get_hardware("a100")
    if network.startswith("nic_x"):
        hw = hw.scaled_network(float(network[len("nic_x"):]))
    job = JobSpec(model=model, gpus=int(gpus), tp=tp, pp=pp, dp=int(gpus) // (tp * pp),
                  global_batch=global_batch, distributed_optimizer=distributed_optimizer,
                  overlap=_overlap(overlap), virtual_stages=int(virtual_stages))
    pred = predict(job, fabric, hw, comm_model=_comm_model(fabric, hw, failed, seed)).to_json()
    return {"mfu": pred["mfu"], "iteration_s": pred["iteration_s"],
            "tokens_per_s": pred["tokens_per_s"], "bubble_s": pred["bubble_s"],
            "exposed_comm_s": pred["exposed_comm_s"]["total"],
            "exposed_dp_s": pred["exposed_comm_s"]["dp"],
            "compute_s": pred["compute_s"]}
