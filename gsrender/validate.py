"""Argument checks for the public API: every error names the argument (docs/design.md §8)."""
from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Sequence

import torch

from gsrender import _C


def tensor(x, name: str, shape: tuple, *, dtype=None, device=None, finite=True) -> torch.Tensor:
    """Checks that x is a floating tensor of `shape` (None = any size at that position)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype} (like means), got {x.dtype}")
    if device is not None and x.device != device:
        raise ValueError(f"{name} must be on {device} (like means), got {x.device}")
    want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
    if x.dim() != len(shape) or any(s is not None and x.shape[i] != s for i, s in enumerate(shape)):
        raise ValueError(f"{name} must have shape {want}, got {list(x.shape)}")
    if finite and values_checked(x.device) and not all_finite(x):
        raise ValueError(f"{name} contains NaN or Inf")
    return x


def tensor_dims(t, name: str, ndim: int | Sequence[int] | None,
                last: Sequence[int | None] = ()) -> None:
    """Raises TypeError/ValueError naming the argument unless t is a tensor with ndim dims
    (None: any, at least len(last)) whose trailing sizes match last (None: any size). Looser than
    tensor(): any dtype, any leading dims (the float64 reference and the geometry helpers)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if ndim is None:
        ok, want = t.dim() >= len(last), f"at least {len(last)}"
    else:
        ndims = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        ok, want = t.dim() in ndims, " or ".join(map(str, ndims))
    if not ok:
        raise ValueError(f"{name}: expected {want} dims, got shape {tuple(t.shape)}")
    for i, size in enumerate(last):
        if size is not None and t.shape[t.dim() - len(last) + i] != size:
            raise ValueError(f"{name}: expected trailing dims {tuple(last)}, got shape "
                             f"{tuple(t.shape)}")


def all_finite(x: torch.Tensor) -> bool:
    """True when x holds no NaN/Inf. A NaN or Inf makes the sum non-finite, and one fast
    reduction is much cheaper than torch.isfinite on the CPU; only a non-finite sum (possibly
    from overflow of huge finite values) pays for the exact check."""
    if x.numel() == 0:
        return True
    return bool(torch.isfinite(x.sum())) or bool(torch.isfinite(x).all())


def values_checked(device: torch.device) -> bool:
    """Whether to run the checks that read tensor data (finite values, ranges). Shapes, dtypes and
    devices are always checked. On the CPU reading data is free and the checks always run; on CUDA
    each one is a device→host sync that stalls the stream, so they run only under validation
    (GSRENDER_VALIDATE=1 or set_validation(True), or validate=True for one call: scope();
    csrc/include/gsrender/validation.h), as the kernels' own binning checks do. Under torch.compile they never run, so the graph has no
    data-dependent branches."""
    if torch.compiler.is_compiling():
        return False
    return device.type == "cpu" or _C.validation()


def set_validation(on: bool) -> None:
    """Check tensor values on CUDA too (inputs finite and in range, tile lists consistent): a host
    sync per check, meant for debugging and tests. The CPU backend always checks."""
    if not isinstance(on, bool):
        raise TypeError(f"on must be a bool, got {type(on).__name__}")
    _C.set_validation(on)


def validation() -> bool:
    """Whether CUDA calls check tensor values (see set_validation; inside a validate=True or
    validate=False call, that call's setting)."""
    return _C.validation()


class _CallValidation:
    """Sets this thread's per-call override in _C (validation.h) and restores the previous one."""

    def __init__(self, on: bool):
        self.on = on

    def __enter__(self):
        self.prev = _C.set_call_validation(int(self.on))

    def __exit__(self, *exc):
        _C.set_call_validation(self.prev)


def scope(validate: bool | None):
    """A context in which CUDA value checks follow `validate` (None: the global setting): every
    check of the call, the Python ones (values_checked) and the C++ ops' (binning consistency,
    contributors' pixels) alike. The CPU checks values whatever it says. Under torch.compile it is
    a no-op (no checks run while compiling, see values_checked)."""
    if validate is not None and not isinstance(validate, bool):
        raise TypeError(f"validate must be a bool or None, got {type(validate).__name__}")
    if validate is None or torch.compiler.is_compiling():
        return contextlib.nullcontext()
    return _CallValidation(validate)


def call_setting() -> bool | None:
    """This thread's per-call setting (None: none set), for an autograd backward to re-apply
    what its forward ran under (the backward may run on another thread)."""
    v = _C.call_validation()
    return None if v < 0 else v == 1


def per_call(fn):
    """Decorates a public function taking `validate: bool | None = None`: the call runs inside
    scope(validate)."""
    @functools.wraps(fn)
    def wrapper(*args, validate: bool | None = None, **kwargs):
        with scope(validate):
            return fn(*args, validate=validate, **kwargs)
    return wrapper


def positive_int(v, name: str, upper: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if v <= 0 or (upper is not None and v > upper):
        rng = f"in [1, {upper}]" if upper is not None else "positive"
        raise ValueError(f"{name} must be {rng}, got {v}")
    return v


def real(v, name: str, finite: bool = True) -> float:
    """A real number (Python, NumPy or 0-d tensor; bools and strings refused), finite unless
    finite=False."""
    if isinstance(v, (bool, str, bytes)) or not hasattr(v, "__float__"):
        raise TypeError(f"{name} must be a number, got {type(v).__name__}")
    v = float(v)
    if finite and not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    return v


def choice(v, name: str, options: tuple) -> str:
    if v not in options:
        raise ValueError(f"{name} must be one of {options}, got {v!r}")
    return v
