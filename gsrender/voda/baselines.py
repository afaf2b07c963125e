"""The baselines VODA plugs into, on frozen (RGB-trained) geometry: for the trained ones only the
per-Gaussian features (and a classifier head) are learnt through the rendered feature map.

IdentityBaseline   Gaussian Grouping / Gaga style: 16-d identity per Gaussian, 1×1 linear
                   classifier on the rendered map, cross-entropy on mask ids.
GroupingBaseline   IdentityBaseline plus Gaussian Grouping's 3D regulariser: the KL divergence
                   between the class distribution of a sampled Gaussian and those of its k
                   nearest Gaussians in 3D (k = 5 counting itself), weight / n_classes (as
                   Gaussian Grouping's loss_cls_3d), which spreads labels from the visible
                   surface to the Gaussians right behind it. make_baseline("grouping") is the
                   stronger variant (un-normalised cross-entropy on n_objects + 1 classes, 800
                   samples every iteration); make_baseline("gg") is Gaussian Grouping as
                   released (GG_RELEASED: 256 classes, cross-entropy / ln 256, 1,000 samples
                   every 5th iteration) and "gg-2d" the same without the 3D term.
DistillBaseline    LangSplat / Feature 3DGS style: the rendered map regresses each view's 2D
                   feature map, here a per-view noisy embedding of each mask (a stand-in for the
                   CLIP/DINO feature of a SAM mask, which changes with the view), with a cosine
                   loss; objects are queried with the mean embedding over the views.
VotingBaseline     training-free: each Gaussian's centre is projected into every training view's
                   mask and votes for the label there (no visibility test: a hidden Gaussian votes
                   for whatever covers it); its features are the vote shares.

All expose: features [N,D], parameters(), set_view(i) (the training view of the iteration),
render_loss, regularizer(gen), score (s(F, label) in [0,1] for VODA's cluster choice),
pixel_loss, class_scores (per-Gaussian, for selection), segment (rendered map -> class ids).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

FEATURE_DIM = 16
KNN_K = 5            # Gaussian Grouping's reg3d_k (its neighbour set includes the point itself)
KNN_SAMPLES = 800    # Gaussians sampled per iteration for the 3D regulariser
KNN_LAMBDA = 2.0     # Gaussian Grouping's reg3d_lambda_val (the loss is divided by n_classes)
# Gaussian Grouping's max_points: above this many Gaussians each application of the 3D term draws
# this many at random and takes its sample and their neighbours among them (all-pairs neighbours
# of a million-Gaussian model would take hours); at or below it the neighbours of every Gaussian
# are found once, the same as drawing the whole set each time
KNN_MAX_POINTS = 200_000
VIEW_NOISE = 0.5     # norm of the per-view perturbation of a mask's unit embedding
# Gaussian Grouping as released (lkeab/gaussian-grouping, config/gaussian_dataset/train.json:
# num_classes 256, reg3d_interval 5, reg3d_k 5, reg3d_lambda_val 2, reg3d_sample_size 1000;
# train.py divides the cross-entropy by ln(num_classes), utils/loss_utils.py's loss_cls_3d the
# KL term by num_classes)
GG_RELEASED = {"n_classes": 256, "every": 5, "k": 5, "weight": 2.0, "samples": 1000}


def _init_features(n: int, dim: int, gen: torch.Generator) -> torch.nn.Parameter:
    # small random identities: a Gaussian the rendered loss never reaches keeps a feature that
    # explains no class (as in the published methods, where features start random)
    return torch.nn.Parameter(0.1 * torch.randn(n, dim, generator=gen))


def knn(points: torch.Tensor, k: int, chunk: int = 1024) -> torch.Tensor:
    """[N,k] indices of each point's k nearest points (itself first), brute force by chunks."""
    if not 1 <= k <= points.shape[0]:
        raise ValueError(f"k must be in [1, {points.shape[0]}], got {k}")
    return torch.cat([torch.cdist(points[s:s + chunk], points).topk(k, largest=False).indices
                      for s in range(0, points.shape[0], chunk)])


class Baseline:
    """Defaults for what a baseline does not use: one target for every view, no 3D term."""

    reg_every = 1  # iterations between applications of the 3D term (1: every iteration)

    def set_view(self, index: int) -> None:
        pass

    def regularizer(self, gen: torch.Generator):
        return None


class IdentityBaseline(Baseline):
    name = "identity"
    select_threshold = 0.5  # class probability

    def __init__(self, n_gaussians: int, n_classes: int, dim: int = FEATURE_DIM, seed: int = 0,
                 ce_scale: float = 1.0):
        """ce_scale multiplies the cross-entropy (Gaussian Grouping: 1 / ln(n_classes))."""
        gen = torch.Generator().manual_seed(seed)
        self.ce_scale = float(ce_scale)
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
        return self.ce_scale * F.cross_entropy(self.classifier(rendered[keep]), labels[keep])

    def score(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.classifier(feats).softmax(-1).gather(-1, labels[..., None])[..., 0]

    def pixel_loss(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.ce_scale * F.cross_entropy(self.classifier(feats), labels, reduction="none")

    def class_scores(self, feats: torch.Tensor | None = None) -> torch.Tensor:
        """[N, n_classes] class probabilities of per-Gaussian features."""
        return self.classifier(self.features if feats is None else feats).softmax(-1)

    def segment(self, rendered: torch.Tensor) -> torch.Tensor:
        return self.classifier(rendered).argmax(-1)


class GroupingBaseline(IdentityBaseline):
    name = "grouping"

    def __init__(self, n_gaussians: int, n_classes: int, means: torch.Tensor,
                 dim: int = FEATURE_DIM, seed: int = 0, k: int = KNN_K,
                 samples: int = KNN_SAMPLES, weight: float = KNN_LAMBDA, every: int = 1,
                 ce_scale: float = 1.0, max_points: int = KNN_MAX_POINTS):
        super().__init__(n_gaussians, n_classes, dim, seed, ce_scale)
        if means.shape != (n_gaussians, 3):
            raise ValueError(f"means must have shape [{n_gaussians}, 3], got {tuple(means.shape)}")
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        if max_points < k:
            raise ValueError(f"max_points must be >= k ({k}), got {max_points}")
        self.means, self.k, self.max_points = means.detach().float(), int(k), int(max_points)
        # frozen geometry: every Gaussian's neighbours once, or per application above max_points
        self.neighbours = knn(self.means, k) if n_gaussians <= max_points else None
        self.samples, self.weight, self.reg_every = samples, weight, int(every)

    def _sample(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """[S] sampled Gaussians and [S, k] their nearest (itself first), as Gaussian Grouping
        draws them."""
        n = self.features.shape[0]
        if self.neighbours is not None:
            idx = torch.randperm(n, generator=gen)[:self.samples]
            return idx, self.neighbours.index_select(0, idx)
        pool = torch.randperm(n, generator=gen)[:self.max_points]
        idx = pool[torch.randperm(pool.numel(), generator=gen)[:self.samples]]
        near = torch.cdist(self.means[idx], self.means[pool]).topk(self.k, largest=False).indices
        return idx, pool[near]

    def regularizer(self, gen: torch.Generator) -> torch.Tensor:
        """weight/n_classes · mean over sampled Gaussians j and neighbours m of KL(P_j ‖ P_m)."""
        idx, nb = self._sample(gen)  # [S], [S, k]
        p = self.class_scores(self.features.index_select(0, idx))  # [S, C]
        q = self.class_scores(self.features.index_select(0, nb.reshape(-1))).view(*nb.shape, -1)
        kl = (p[:, None] * (torch.log(p[:, None] + 1e-10) - torch.log(q + 1e-10))).sum(-1)
        return self.weight * kl.mean() / p.shape[-1]


class DistillBaseline(Baseline):
    name = "distill"
    select_threshold = 0.5  # cosine to the object's query embedding

    def __init__(self, n_gaussians: int, n_classes: int, dim: int = FEATURE_DIM, seed: int = 0,
                 n_views: int = 1, view_noise: float = VIEW_NOISE):
        gen = torch.Generator().manual_seed(seed)
        self.features = _init_features(n_gaussians, dim, gen)
        proto = F.normalize(torch.randn(n_classes, dim, generator=gen), dim=-1)
        noise = torch.randn(n_views, n_classes, dim, generator=gen) / dim ** 0.5
        self.targets = F.normalize(proto + view_noise * noise, dim=-1)  # [V, n_classes, D]
        self.query = F.normalize(self.targets.mean(0), dim=-1)  # what an object is selected by
        self.view = 0

    def parameters(self):
        return [self.features]

    def set_view(self, index: int) -> None:
        if not 0 <= index < self.targets.shape[0]:
            raise ValueError(f"index must be in [0, {self.targets.shape[0]}), got {index}")
        self.view = index

    def _cos(self, feats, labels):
        return F.cosine_similarity(feats, self.targets[self.view][labels], dim=-1, eps=1e-8)

    def render_loss(self, rendered: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        keep = labels >= 0
        return (1 - self._cos(rendered[keep], labels[keep])).mean()

    def score(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self._cos(feats, labels).clamp_min(0)

    def pixel_loss(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return 1 - self._cos(feats, labels)

    def class_scores(self, feats: torch.Tensor | None = None) -> torch.Tensor:
        f = self.features if feats is None else feats
        return F.normalize(f, dim=-1, eps=1e-8) @ self.query.T

    def segment(self, rendered: torch.Tensor) -> torch.Tensor:
        return (F.normalize(rendered, dim=-1, eps=1e-8) @ self.query.T).argmax(-1)


def project_votes(means: torch.Tensor, labels: torch.Tensor, viewmats: torch.Tensor,
                  Ks: torch.Tensor, n_classes: int) -> torch.Tensor:
    """[N, n_classes] votes: per view, the label [C,H,W] (-1: no vote) at the pixel each centre
    [N,3] projects to (pinhole, pixel i spanning [i, i+1)), for centres in front of the camera
    and inside the image."""
    votes = torch.zeros(means.shape[0], n_classes)
    for c in range(labels.shape[0]):
        lab = centre_labels(means, labels[c], viewmats[c], Ks[c])
        hit = lab >= 0
        votes[torch.nonzero(hit, as_tuple=True)[0], lab[hit]] += 1
    return votes


def centre_labels(means: torch.Tensor, label: torch.Tensor, viewmat: torch.Tensor,
                  K: torch.Tensor) -> torch.Tensor:
    """[N] long: the label [H,W] at the pixel each centre [N,3] projects to in one view
    (pinhole, pixel i spanning [i, i+1)); -1 behind the camera or outside the image."""
    H, W = label.shape
    cam = means.detach().float() @ viewmat[:3, :3].T.float() + viewmat[:3, 3].float()
    z = cam[:, 2]
    uv = cam @ K.T.float()
    u = torch.floor(uv[:, 0] / z.clamp_min(1e-8)).long()
    v = torch.floor(uv[:, 1] / z.clamp_min(1e-8)).long()
    ok = (z > 1e-2) & (u >= 0) & (u < W) & (v >= 0) & (v < H)
    lab = torch.full_like(u, -1)
    lab[ok] = label[v[ok], u[ok]].long()
    return lab


class VotingBaseline(Baseline):
    name = "vote"
    select_threshold = 0.5  # share of the votes

    def __init__(self, means: torch.Tensor, labels: torch.Tensor, viewmats: torch.Tensor,
                 Ks: torch.Tensor, n_classes: int):
        votes = project_votes(means, labels, viewmats, Ks, n_classes)
        self.features = votes / votes.sum(1, keepdim=True).clamp_min(1)  # never seen: all 0

    def parameters(self):
        return []

    def class_scores(self, feats: torch.Tensor | None = None) -> torch.Tensor:
        return self.features if feats is None else feats

    def segment(self, rendered: torch.Tensor) -> torch.Tensor:
        return rendered.argmax(-1)


class OracleBaseline(Baseline):
    """The true object set: each Gaussian's class is its object id (on a trained model, the
    derived one). Its removal error is the floor any selection of whole Gaussians can reach."""

    name = "oracle"
    select_threshold = 0.5

    def __init__(self, object_ids: torch.Tensor, n_classes: int):
        self.features = F.one_hot(object_ids.long(), n_classes).to(torch.float32)

    def parameters(self):
        return []

    def class_scores(self, feats: torch.Tensor | None = None) -> torch.Tensor:
        return self.features if feats is None else feats

    def segment(self, rendered: torch.Tensor) -> torch.Tensor:
        return rendered.argmax(-1)


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


TRAINED = ("identity", "grouping", "distill")
RELEASED = ("gg-2d", "gg")  # Gaussian Grouping as released, without and with its 3D term


def make_baseline(name: str, means: torch.Tensor, n_classes: int, n_views: int, seed: int = 0):
    """A trained baseline (TRAINED or RELEASED) for a scene of Gaussians at `means` [N,3],
    n_classes mask ids and n_views views."""
    n = means.shape[0]
    if name == "identity":
        return IdentityBaseline(n, n_classes, seed=seed)
    if name == "grouping":
        return GroupingBaseline(n, n_classes, means, seed=seed)
    if name in RELEASED:
        g = GG_RELEASED
        classes = max(n_classes, g["n_classes"])
        scale = 1.0 / math.log(classes)
        if name == "gg-2d":
            return IdentityBaseline(n, classes, seed=seed, ce_scale=scale)
        return GroupingBaseline(n, classes, means, seed=seed, k=g["k"], samples=g["samples"],
                                weight=g["weight"], every=g["every"], ce_scale=scale)
    if name == "distill":
        return DistillBaseline(n, n_classes, seed=seed, n_views=n_views)
    raise ValueError(f"baseline must be one of {TRAINED + RELEASED}, got {name!r}")
