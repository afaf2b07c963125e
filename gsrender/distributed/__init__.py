"""gsrender on several processes (torch.distributed: gloo on the CPU, NCCL on GPUs): Gaussians
and cameras sharded over ranks, projected Gaussians exchanged all-to-all (docs/distributed.md)."""
from gsrender.distributed.comm import all_gather_rows, init, local_device, timeout_seconds
from gsrender.distributed.rasterize import rasterize

__all__ = ["all_gather_rows", "init", "local_device", "rasterize", "timeout_seconds"]
