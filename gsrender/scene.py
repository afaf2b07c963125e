"""GaussianModel: the activated parameters of a 3DGS scene, as the renderer consumes them."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch


@dataclass
class GaussianModel:
    """Activated Gaussian parameters (not the logits/logs a PLY stores).

    means [N,3], quats [N,4] wxyz (any norm), scales [N,3] > 0, opacities [N] in (0,1),
    sh [N,K,3] SH coefficients (K = (sh_degree+1)^2; sh[:,0] is the DC term),
    features [N,D] optional extra per-Gaussian channels, object_ids [N] optional int64 labels.
    """

    means: torch.Tensor
    quats: torch.Tensor
    scales: torch.Tensor
    opacities: torch.Tensor
    sh: torch.Tensor
    features: torch.Tensor | None = None
    object_ids: torch.Tensor | None = None
    meta: dict = field(default_factory=dict)

    @property
    def num_gaussians(self) -> int:
        return int(self.means.shape[0])

    @property
    def sh_degree(self) -> int:
        k = int(self.sh.shape[1])
        deg = round(k ** 0.5) - 1
        if (deg + 1) ** 2 != k:
            raise ValueError(f"sh has {k} coefficients per channel, not a square (deg+1)^2")
        return deg

    def to(self, *args, **kwargs) -> GaussianModel:
        def conv(t):
            if t is None:
                return None
            if not t.is_floating_point():
                return t.to(device=kwargs.get("device", args[0] if args and not isinstance(
                    args[0], torch.dtype) else t.device))
            return t.to(*args, **kwargs)

        return replace(
            self, means=conv(self.means), quats=conv(self.quats), scales=conv(self.scales),
            opacities=conv(self.opacities), sh=conv(self.sh), features=conv(self.features),
            object_ids=conv(self.object_ids),
        )

    def subset(self, mask: torch.Tensor) -> GaussianModel:
        """The Gaussians where mask (bool [N] or an index tensor) selects."""
        pick = lambda t: None if t is None else t[mask]
        return replace(
            self, means=self.means[mask], quats=self.quats[mask], scales=self.scales[mask],
            opacities=self.opacities[mask], sh=self.sh[mask], features=pick(self.features),
            object_ids=pick(self.object_ids),
        )

    @staticmethod
    def cat(models: list[GaussianModel]) -> GaussianModel:
        if not models:
            raise ValueError("models: need at least one GaussianModel")
        degs = {m.sh.shape[1] for m in models}
        if len(degs) != 1:
            raise ValueError(f"models: SH sizes differ ({sorted(degs)})")

        def opt(name):
            vals = [getattr(m, name) for m in models]
            if all(v is None for v in vals):
                return None
            if any(v is None for v in vals):
                raise ValueError(f"models: '{name}' is set on some models and not others")
            return torch.cat(vals)

        return GaussianModel(
            means=torch.cat([m.means for m in models]),
            quats=torch.cat([m.quats for m in models]),
            scales=torch.cat([m.scales for m in models]),
            opacities=torch.cat([m.opacities for m in models]),
            sh=torch.cat([m.sh for m in models]),
            features=opt("features"),
            object_ids=opt("object_ids"),
        )


SH_C0 = 0.28209479177387814


def rgb_to_sh(rgb: torch.Tensor) -> torch.Tensor:
    """DC SH coefficient whose rendered colour (SH·dir + 0.5) is rgb."""
    return (rgb - 0.5) / SH_C0


def sh_to_rgb(dc: torch.Tensor) -> torch.Tensor:
    return dc * SH_C0 + 0.5
