"""The rendering-based baselines VODA plugs into, on frozen (RGB-trained) geometry: only the
per-Gaussian features (and a classifier head) are learnt through the rendered feature map.

IdentityBaseline   Gaussian Grouping / Gaga style: 16-d identity per Gaussian, 1×1 linear
                   classifier on the rendered map, cross-entropy on mask ids.
DistillBaseline    LangSplat / Feature 3DGS style: the rendered map regresses a 2D feature map,
                   here a fixed unit prototype per mask id (a stand-in for the CLIP/DINO feature
                   of a SAM mask), with a cosine loss.

Both expose the same interface: features [N,D], parameters(), render_loss, score (s(F, label) in
[0,1] for VODA's cluster choice), pixel_loss, class_scores (per-Gaussian, for selection),
segment (rendered map -> class ids) and keep_member (VODA's member veto).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

FEATURE_DIM = 16


def _init_features(n: int, dim: int, gen: torch.Generator) -> torch.nn.Parameter:
    # small random identities: a Gaussian the rendered loss never reaches keeps a feature that
    # explains no class (as in the published methods, where features start random)
    return torch.nn.Parameter(0.1 * torch.randn(n, dim, generator=gen))


class IdentityBaseline:
    name = "identity"
    select_threshold = 0.5  # class probability

    def __init__(self, n_gaussians: int, n_classes: int, dim: int = FEATURE_DIM, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        self.features = _init_features(n_gaussians, dim, gen)
        self.classifier = torch.nn.Linear(dim, n_classes)
        with torch.no_grad():
            w = torch.randn(n_classes, dim, generator=gen) / dim ** 0.5
            self.classifier.weight.copy_(w)
            self.classifier.bias.zero_()

    def parameters(self):
        return [self.features, *self.classifier.parameters()]

    def render_loss(self, rendered: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """rendered [...,D], labels [...] (-1 = unlabelled) -> mean cross-entropy."""
        keep = labels >= 0
        return F.cross_entropy(self.classifier(rendered[keep]), labels[keep])

    def score(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.classifier(feats).softmax(-1).gather(-1, labels[..., None])[..., 0]

    def pixel_loss(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.classifier(feats), labels, reduction="none")

    def class_scores(self, feats: torch.Tensor | None = None) -> torch.Tensor:
        """[N, n_classes] class probabilities of per-Gaussian features."""
        return self.classifier(self.features if feats is None else feats).softmax(-1)

    def segment(self, rendered: torch.Tensor) -> torch.Tensor:
        return self.classifier(rendered).argmax(-1)


class DistillBaseline:
    name = "distill"
    select_threshold = 0.5  # cosine to the object's prototype

    def __init__(self, n_gaussians: int, n_classes: int, dim: int = FEATURE_DIM, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        self.features = _init_features(n_gaussians, dim, gen)
        self.prototypes = F.normalize(torch.randn(n_classes, dim, generator=gen), dim=-1)

    def parameters(self):
        return [self.features]

    def _cos(self, feats, labels):
        return F.cosine_similarity(feats, self.prototypes[labels], dim=-1, eps=1e-8)

    def render_loss(self, rendered: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        keep = labels >= 0
        return (1 - self._cos(rendered[keep], labels[keep])).mean()

    def score(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self._cos(feats, labels).clamp_min(0)

    def pixel_loss(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return 1 - self._cos(feats, labels)

    def class_scores(self, feats: torch.Tensor | None = None) -> torch.Tensor:
        f = self.features if feats is None else feats
        return F.normalize(f, dim=-1, eps=1e-8) @ self.prototypes.T

    def segment(self, rendered: torch.Tensor) -> torch.Tensor:
        return (F.normalize(rendered, dim=-1, eps=1e-8) @ self.prototypes.T).argmax(-1)


def keep_member(baseline, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """bool [E]: False for Gaussians the baseline already confidently assigns to a class other
    than the pixel's label (score above its selection threshold), so VODA's volumetric target
    never drags a visible neighbour's surface into the chosen cluster's object."""
    scores = baseline.class_scores(feats)  # [E, n_classes]
    best, cls = scores.max(-1)
    return (cls == labels) | (best <= baseline.select_threshold)


def confident(baseline, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """bool [E]: the baseline already gives these Gaussians their pixel's label (class score
    above its selection threshold): VODA's enclosure rule keeps the members up to the last one."""
    return baseline.class_scores(feats).gather(-1, labels[:, None])[:, 0] > baseline.select_threshold


BASELINES = {"identity": IdentityBaseline, "distill": DistillBaseline}
