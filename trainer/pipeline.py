"""The 1F1B pipeline schedule with point-to-point activations and gradients.

Megatron-LM's ``forward_backward_pipelining_without_interleaving`` (Narayanan et al. 2021,
section 2.2.1, Figure 4 top): stage p of P runs ``min(P - p - 1, M)`` warm-up forwards, then
alternates one forward and one backward (steady state, sending its output and receiving the
output gradient in one exchange), then drains the remaining backwards (cool-down). The DP
reducer is armed before the last micro-batch's backward so that bucket reductions overlap it.
"""

from __future__ import annotations

from collections import deque

import torch

from trainer.comm import Comm
from trainer.data_parallel import DataParallel
from trainer.mesh import Mesh
from trainer.model import GPTStage
from trainer.trace import Tracer


class OneFOneB:
    """Runs one iteration's micro-batches through this stage."""

    def __init__(self, stage: GPTStage, mesh: Mesh, comm: Comm, tracer: Tracer,
                 dp: DataParallel, act_shape: tuple[int, int, int], dtype: torch.dtype,
                 device: torch.device) -> None:
        self.stage, self.mesh, self.comm, self.tracer, self.dp = stage, mesh, comm, tracer, dp
        self.shape, self.dtype, self.device = act_shape, dtype, device
        self.first, self.last = mesh.first_stage, mesh.last_stage
        self.prev = None if self.first else mesh.pp_neighbor(-1)
        self.next = None if self.last else mesh.pp_neighbor(+1)

    # -- point to point ------------------------------------------------------------------------
    def _empty(self) -> torch.Tensor:
        return torch.empty(self.shape, dtype=self.dtype, device=self.device)

    def _exchange(self, send: torch.Tensor | None, peer_send: int | None, want_recv: bool,
                  peer_recv: int | None) -> torch.Tensor | None:
        recv = self._empty() if (want_recv and peer_recv is not None) else None
        sends = [(send.detach().contiguous(), peer_send)] if (send is not None and peer_send is not None) else []
        recvs = [(recv, peer_recv)] if recv is not None else []
        if sends or recvs:
            self.comm.p2p(sends, recvs, "pp")
        return recv

    def recv_forward(self) -> torch.Tensor | None:
        x = self._exchange(None, None, True, self.prev)
        return x.requires_grad_() if x is not None else None

    def send_forward(self, y: torch.Tensor) -> None:
        self._exchange(None if self.last else y, self.next, False, None)

    def send_forward_recv_backward(self, y: torch.Tensor) -> torch.Tensor | None:
        return self._exchange(None if self.last else y, self.next, True, self.next)

    def send_backward_recv_forward(self, dx: torch.Tensor | None) -> torch.Tensor | None:
        x = self._exchange(dx, self.prev, True, self.prev)
        return x.requires_grad_() if x is not None else None

    def recv_backward(self) -> torch.Tensor | None:
        return self._exchange(None, None, True, self.next)

    def send_backward(self, dx: torch.Tensor | None) -> None:
        self._exchange(dx, self.prev, False, None)

    # -- compute -------------------------------------------------------------------------------
    def _forward(self, x, ids, targets, i: int, losses: list) -> torch.Tensor:
        self.tracer.microbatch = i
        out = self.stage(ids[i] if self.first else x)
        if self.last:
            out = self.stage.loss(out, targets[i]) / ids.shape[0]
            losses.append(out.detach())
        return out

    def _backward(self, x, y, g, i: int, m: int) -> torch.Tensor | None:
        self.tracer.microbatch = i
        if i == m - 1:
            self.dp.arm()
        if self.last:
            y.backward()
        else:
            torch.autograd.backward(y, g)
        return None if x is None else x.grad

    def run(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        """Forward and backward every micro-batch ([M, b, s] ids and targets); returns the sum
        of the micro-batch losses / M on the last stage (None elsewhere)."""
        m = ids.shape[0]
        warmup = min(self.mesh.layout.pp - self.mesh.coords["pp"] - 1, m)
        remaining = m - warmup
        inputs, outputs, losses = deque(), deque(), []
        fi = bi = 0
        for _ in range(warmup):
            x = self.recv_forward()
            y = self._forward(x, ids, targets, fi, losses)
            fi += 1
            self.send_forward(y)
            inputs.append(x)
            outputs.append(y)
        x = self.recv_forward() if remaining > 0 else None
        for k in range(remaining):
            y = self._forward(x, ids, targets, fi, losses)
            fi += 1
            g = self.send_forward_recv_backward(y)
            inputs.append(x)
            outputs.append(y)
            dx = self._backward(inputs.popleft(), outputs.popleft(), g, bi, m)
            bi += 1
            if k == remaining - 1:
                x = None
                self.send_backward(dx)
            else:
                x = self.send_backward_recv_forward(dx)
        for _ in range(warmup):
            g = self.recv_backward()
            dx = self._backward(inputs.popleft(), outputs.popleft(), g, bi, m)
            bi += 1
            self.send_backward(dx)
        self.tracer.microbatch = None
        self.dp.finish()
        return torch.stack(losses).sum() if losses else None
