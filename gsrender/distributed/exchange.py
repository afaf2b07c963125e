"""Variable-size all-to-all on torch.distributed, differentiable: the backward sends each row's
gradient back to the rank it came from along the same route (send and receive splits swapped).

Both gloo (CPU tensors) and NCCL (CUDA tensors) implement all_to_all_single with split sizes, so
this is one collective each way plus one tiny one for the counts."""
from __future__ import annotations

import torch
import torch.distributed as dist


def exchange_counts(send_counts: list[int], device: torch.device, group=None) -> list[int]:
    """send_counts[d] = rows this rank sends to rank d -> rows it receives from each rank."""
    send = torch.tensor(send_counts, dtype=torch.int64, device=device)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv.tolist()


def all_to_all_rows(rows: torch.Tensor, send_counts: list[int], recv_counts: list[int],
                    group=None) -> torch.Tensor:
    """rows [sum(send_counts), ...] grouped by destination rank -> [sum(recv_counts), ...]
    grouped by source rank. Not differentiable (ids, radii)."""
    out = rows.new_empty((sum(recv_counts), *rows.shape[1:]))
    dist.all_to_all_single(out, rows.contiguous(), recv_counts, send_counts, group=group)
    return out


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, send_counts, recv_counts, group):
        ctx.route = (send_counts, recv_counts, group)
        return all_to_all_rows(rows, send_counts, recv_counts, group)

    @staticmethod
    def backward(ctx, v_out):
        send_counts, recv_counts, group = ctx.route
        # every rank reaches this exactly once per forward (its own loss depends on what it
        # received), so the reverse collective is matched across ranks
        return all_to_all_rows(v_out, recv_counts, send_counts, group), None, None, None


def all_to_all_rows_autograd(rows: torch.Tensor, send_counts: list[int], recv_counts: list[int],
                             group=None) -> torch.Tensor:
    """all_to_all_rows whose backward routes the received rows' gradients back to their senders."""
    return _AllToAll.apply(rows, send_counts, recv_counts, group)
