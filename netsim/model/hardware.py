"""GPU server profiles from published specifications.

Peak numbers are the vendors' data-sheet figures:

* A100 SXM4 80 GB: 312 TFLOP/s dense BF16, HBM2e 2,039 GB/s, third-generation NVLink 600 GB/s
  total (300 GB/s each direction) per GPU (NVIDIA A100 Tensor Core GPU datasheet, 2021).
  DGX A100 / MegaScale servers: 8 GPUs, 8 x 200 Gb/s compute NICs, one per GPU (DGX A100 user
  guide; MegaScale section 3.6, ``shared/reference/nccl-roce.md`` section 1.2).
* H100 SXM5 80 GB: 989 TFLOP/s dense BF16 (1,979 with sparsity), HBM3 3.35 TB/s, fourth-
  generation NVLink 900 GB/s total per GPU (NVIDIA H100 datasheet); DGX H100: 8 x 400 Gb/s
  ConnectX-7 compute NICs (DGX H100 user guide).
* H200 SXM 141 GB: same compute and NVLink as H100, HBM3e 4.8 TB/s (NVIDIA H200 datasheet);
  DGX H200: 8 x 400 Gb/s.

The ``*_efficiency`` fields are not data-sheet values: they are the fraction of peak that real
kernels and NCCL reach, replaced by a calibration (``netsim calibrate``) when one is given.
The compute ones (``gemm_efficiency``, ``fp8_gemm_efficiency``, ``attention_efficiency``) come
from ``netsim.model.efficiency``: a published microbenchmark's fraction of peak per GPU and
kernel class, times the one training factor fitted on Megatron-LM's 1.7B row (the defaults of
a profile built by hand are the A100's). Hopper's FP8 dense peak is
1,979 TFLOP/s (H100 SXM datasheet; 3,958 with sparsity). NCCL bus bandwidth over NVLink is taken as 0.8 of the per-direction NVLink rate and over the
network as 0.9 of the NIC line rate (nccl-tests ``busbw`` "should reflect the speed of the
hardware bottleneck", ``nccl-roce.md`` section 2.1).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from netsim.model.efficiency import (
    ATTENTION_FRACTION,
    FP8_FRACTION,
    HOPPER_FP8_PEAK_FLOPS_PER_S,
    MAMF_FRACTION,
    training_efficiency,
)
from topologies.units import GB, gbps


@dataclass(frozen=True, kw_only=True, slots=True)
class HardwareProfile:
    """One GPU server type: compute, memory and interconnect rates."""

    name: str
    """Preset name."""
    peak_flops_per_s: float
    """Dense BF16 tensor-core peak per GPU, FLOP/s."""
    hbm_bytes: int
    """HBM capacity per GPU, bytes."""
    hbm_bytes_per_s: float
    """HBM bandwidth per GPU, bytes/s."""
    nvlink_bps: float
    """NVLink bandwidth per GPU per direction, bit/s."""
    gpus_per_server: int = 8
    """GPUs in one server (one NVLink domain)."""
    nics_per_server: int = 8
    """Compute NICs per server."""
    nic_bps: float = gbps(200)
    """Line rate of one NIC, bit/s."""
    gemm_efficiency: float = training_efficiency(MAMF_FRACTION["a100"])
    """Fraction of the BF16 peak that training matmuls reach (``netsim.model.efficiency``)."""
    fp8_peak_flops_per_s: float = 0.0
    """Dense FP8 tensor-core peak per GPU, FLOP/s (0: no FP8 tensor cores, ``--fp8`` refused)."""
    fp8_gemm_efficiency: float = training_efficiency(FP8_FRACTION)
    """Fraction of the FP8 peak that training's FP8 GEMMs reach (``netsim.model.efficiency``)."""
    attention_efficiency: float = training_efficiency(ATTENTION_FRACTION["a100"])
    """Fraction of the BF16 peak FlashAttention reaches (with ``flash_attention``)."""
    memory_efficiency: float = 0.7
    """Fraction of HBM bandwidth element-wise kernels reach (assumption)."""
    nvlink_efficiency: float = 0.8
    """NCCL bus bandwidth over NVLink as a fraction of ``nvlink_bps`` (assumption)."""
    net_efficiency: float = 0.9
    """NCCL bus bandwidth over the network as a fraction of NIC line rate (assumption)."""
    intra_latency_s: float = 3.4e-6
    """Per-step latency inside a server: NCCL Ring/Simple NVLink hwLatency 3.4 us."""
    net_latency_s: float = 14.0e-6
    """Per-step latency across servers: NCCL Ring/Simple NET hwLatency 14 us (nccl-roce 2.2)."""
    flash_attention: bool = False
    """Fused attention kernels (no s^2 softmax traffic)."""
    network_scale: float = 1.0
    """What-if multiplier of every network bandwidth (the fabric's NIC rate or ``nic_bps``)."""
    host_cores: float = math.inf
    """CPU cores the ranks of one server share for their work (``netsim.workload.host``):
    infinite for a GPU server (each rank's work runs on its own GPU), the core count for the
    CPU trainer, whose ``gpus_per_server`` ranks time-slice them."""

    def __post_init__(self) -> None:
        for field in ("peak_flops_per_s", "hbm_bytes_per_s", "nvlink_bps", "nic_bps",
                      "network_scale"):
            if not getattr(self, field) > 0:
                raise ValueError(f"hardware.{field} must be positive (math.inf is allowed)")
        for field in ("gemm_efficiency", "memory_efficiency", "nvlink_efficiency",
                      "net_efficiency", "fp8_gemm_efficiency", "attention_efficiency"):
            if not 0 < getattr(self, field) <= 1:
                raise ValueError(f"hardware.{field} must lie in (0, 1]")
        if self.fp8_peak_flops_per_s < 0:
            raise ValueError("hardware.fp8_peak_flops_per_s must be >= 0 (0: no FP8)")
        if not self.host_cores > 0:
            raise ValueError("hardware.host_cores must be positive (math.inf: not shared)")
        if self.gpus_per_server <= 0 or self.nics_per_server <= 0:
            raise ValueError("hardware.gpus_per_server and nics_per_server must be positive")

    def replace(self, **changes) -> HardwareProfile:
        """Return a copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)

    @property
    def nic_bps_per_gpu(self) -> float:
        """Network bandwidth one GPU can use when all GPUs of a server send at once."""
        return self.nic_bps * self.nics_per_server / self.gpus_per_server

    def scaled_network(self, factor: float) -> HardwareProfile:
        """Profile with every NIC's bandwidth multiplied by ``factor`` (what-if studies)."""
        return self.replace(network_scale=self.network_scale * factor)

    def infinite_network(self) -> HardwareProfile:
        """Profile whose communication costs nothing: every bandwidth infinite, no latency."""
        return self.replace(network_scale=math.inf, nvlink_bps=math.inf, intra_latency_s=0.0,
                            net_latency_s=0.0)


_AMPERE = dict(gemm_efficiency=training_efficiency(MAMF_FRACTION["a100"]),
               attention_efficiency=training_efficiency(ATTENTION_FRACTION["a100"]))
_HOPPER = dict(gemm_efficiency=training_efficiency(MAMF_FRACTION["h100"]),
               fp8_peak_flops_per_s=HOPPER_FP8_PEAK_FLOPS_PER_S,
               fp8_gemm_efficiency=training_efficiency(FP8_FRACTION),
               attention_efficiency=training_efficiency(ATTENTION_FRACTION["h100"]))
A100 = HardwareProfile(
    name="a100", peak_flops_per_s=312e12, hbm_bytes=80 * GB, hbm_bytes_per_s=2039 * GB,
    nvlink_bps=300 * GB * 8, nic_bps=gbps(200), **_AMPERE,
)
H100 = HardwareProfile(
    name="h100", peak_flops_per_s=989e12, hbm_bytes=80 * GB, hbm_bytes_per_s=3350 * GB,
    nvlink_bps=450 * GB * 8, nic_bps=gbps(400), flash_attention=True, **_HOPPER,
)
H200 = HardwareProfile(
    name="h200", peak_flops_per_s=989e12, hbm_bytes=141 * GB, hbm_bytes_per_s=4800 * GB,
    nvlink_bps=450 * GB * 8, nic_bps=gbps(400), flash_attention=True, **_HOPPER,
)

# H800 SXM: the export variant of H100 SXM, same compute and HBM3, NVLink cut to 400 GB/s
# total (200 GB/s each direction); DeepSeek-V3's nodes (arXiv:2412.19437 section 3.1) have
# 8 GPUs and 8 x 400 Gb/s InfiniBand NICs ("IB (50 GB/s)" per GPU, section 3.2.2).
H800 = H100.replace(name="h800", nvlink_bps=200 * GB * 8)

HARDWARE: dict[str, HardwareProfile] = {hw.name: hw for hw in (A100, H100, H200, H800)}


def get_hardware(name: str) -> HardwareProfile:
    """Return the preset ``name`` (a100, h100, h200); ``ValueError`` naming the choices."""
    try:
        return HARDWARE[name.lower()]
    except KeyError:
        raise ValueError(f"unknown gpu {name!r}: choose one of {', '.join(HARDWARE)}") from None
