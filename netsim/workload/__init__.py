"""Workload model: one 3D-parallel training iteration as per-stage compute/communication tasks.

``predict(job, fabric, hardware, calibration=None, placement=None) -> Prediction`` is the entry
point (``docs/workload-model.md`` explains the model). ``JobSpec.from_dict`` reads job files.
Communication is priced by ``AnalyticCommModel`` (alpha-beta per scope, the default) or by
``FlowCommModel`` (the flow engine on the fabric: concurrent groups contend), passed as
``comm_model``.
"""

from netsim.workload.comm import (
    SCOPES,
    AlphaBeta,
    AnalyticCommModel,
    CommBatch,
    CommModel,
    Locality,
    bus_factor,
    fabric_locality,
    group_scopes,
    synthetic_locality,
)
from netsim.workload.compute import ComputeModel, RooflineCompute, TaskShape
from netsim.workload.flowcomm import FlowCommModel
from netsim.workload.job import JobSpec, Overlap, rank_grid, validate
from netsim.workload.pipeline import PipelineRun, simulate_pipeline, stage_order
from netsim.workload.predict import KINDS, Prediction, predict

__all__ = [
    "KINDS", "SCOPES", "AlphaBeta", "AnalyticCommModel", "CommBatch", "CommModel",
    "ComputeModel", "FlowCommModel", "JobSpec", "Locality", "Overlap", "PipelineRun", "Prediction",
    "RooflineCompute", "TaskShape", "bus_factor", "fabric_locality", "group_scopes",
    "predict", "rank_grid", "simulate_pipeline", "stage_order", "synthetic_locality",
    "validate",
]
