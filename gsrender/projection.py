"""Which projection a render call runs (docs/cameras.md): the projection op (EWA, quats +
scales; CPU and CUDA kernels) by default, the PyTorch EWA projection of covariance matrices for
covars= (gsrender/ewa.py), and the unscented transform through lens distortion for with_ut=True. Each returns
ops.project's outputs, so binning and rasterization do not depend on the choice."""
from __future__ import annotations

from gsrender import distortion, ewa, ops, unscented

DISTORTION_ARGUMENTS = ("radial_coeffs", "tangential_coeffs", "thin_prism_coeffs")


def project(means, quats, scales, opacities, viewmats, Ks, width: int, height: int, eps2d: float,
            near_plane: float, far_plane: float, radius_clip: float, antialiased: bool,
            camera_model: str = "pinhole", *, covars=None, with_ut: bool = False,
            radial_coeffs=None, tangential_coeffs=None, thin_prism_coeffs=None):
    """-> radii [C,N,2] int32, means2d [C,N,2], depths [C,N], conics [C,N,3], opacities2d [C,N]
    (ops.project's). covars [N,3,3] replaces quats and scales (pass them as None); the
    distortion coefficients (gsrender/distortion.py) need with_ut=True, as in gsplat."""
    if not isinstance(with_ut, bool):
        raise TypeError(f"with_ut must be a bool, got {type(with_ut).__name__}")
    coeffs = dict(zip(DISTORTION_ARGUMENTS, (radial_coeffs, tangential_coeffs, thin_prism_coeffs),
                      strict=True))
    if with_ut:
        lens = distortion.lens(camera_model, Ks, width, height, **coeffs)
        out = unscented.project(means, opacities, viewmats, Ks, width, height, eps2d, near_plane,
                                far_plane, radius_clip, antialiased, lens, quats=quats,
                                scales=scales, covars=covars)
    else:
        for name, value in coeffs.items():
            if value is not None:
                raise ValueError(f"{name}: lens distortion is projected through the unscented "
                                 f"transform only; pass with_ut=True (as gsplat)")
        if covars is None:
            return ops.project(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d,
                               near_plane, far_plane, radius_clip, antialiased, camera_model)
        out = ewa.project_covariances(means, covars, opacities, viewmats, Ks, width, height, eps2d,
                                      near_plane, far_plane, radius_clip, antialiased, camera_model)
    return out["radii"], out["means2d"], out["depths"], out["conics"], out["opacities2d"]
