"""What a case's tile lists make the raster kernels do: each 16×16 tile's block stages its
depth-ordered list in chunks of CHUNK entries (one per thread), so a list longer than CHUNK runs
the second `begin_chunk`, offsets past the first chunk and the chunk-end waits, and a list that
ends inside a chunk runs its partial-chunk masks. Used by make_cases (printed per case) and by
the checker (a set whose longest list fits in two chunks fails)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHUNK = 256  # list entries per chunk: one per thread of a 16×16 tile's block
MIN_CHUNKS = 3  # a standard set needs some list longer than this many chunks − 1


@dataclass
class ListStats:
    longest: int  # entries in the longest tile list
    multi_chunk: int  # tiles whose list spans more than one chunk
    tiles: int

    def chunks(self) -> int:
        return -(-self.longest // CHUNK)

    def __str__(self) -> str:
        return (f"longest list {self.longest} ({self.chunks()} chunks), "
                f"{self.multi_chunk}/{self.tiles} tiles multi-chunk")


def list_lengths(tile_offsets: np.ndarray, n_entries: int) -> np.ndarray:
    """Each tile's list length from binning's tile_offsets ([C, TH, TW] list starts) and the
    number of entries M (the last list ends there)."""
    starts = tile_offsets.astype(np.int64).ravel()
    return np.diff(np.append(starts, n_entries))


def list_stats(tile_offsets: np.ndarray, n_entries: int) -> ListStats:
    n = list_lengths(tile_offsets, n_entries)
    return ListStats(int(n.max()) if n.size else 0, int(np.count_nonzero(n > CHUNK)), int(n.size))


def chunk_reach(tile_offsets: np.ndarray, n_entries: int, last_ids: np.ndarray,
                tile_size: int = 16) -> tuple[int, int]:
    """-> (multi-chunk tiles whose pixels all end in the first chunk, multi-chunk tiles where
    some pixel's last entry lies in the list's last chunk), from a sorted forward's last_ids
    ([C, H, W]: each pixel's last list entry, an index into flatten_ids): the first kind lets
    the block stop after one chunk, the second walks every chunk."""
    C, TH, TW = tile_offsets.shape
    H, W = last_ids.shape[1:]
    pad = np.full((C, TH * tile_size, TW * tile_size), -1, dtype=np.int64)
    pad[:, :H, :W] = last_ids
    deepest = pad.reshape(C, TH, tile_size, TW, tile_size).max((2, 4)).ravel()
    starts = tile_offsets.astype(np.int64).ravel()
    n = list_lengths(tile_offsets, n_entries)
    multi = n > CHUNK
    first = multi & (deepest < starts + CHUNK)
    last_chunk_start = starts + (n - 1) // CHUNK * CHUNK
    to_end = multi & (deepest >= last_chunk_start)
    return int(first.sum()), int(to_end.sum())


# gaussian_groups' labels
UNLISTED, FIRST_CHUNK, LATER_CHUNKS, BOTH = 0, 1, 2, 3
GROUP_NAMES = {FIRST_CHUNK: "first-chunk", LATER_CHUNKS: "later-chunk", BOTH: "both-chunk"}


def gaussian_groups(tile_offsets: np.ndarray, flatten_ids: np.ndarray,
                    n_gaussians: int) -> np.ndarray:
    """Each Gaussian's (flattened c·N + n) group by its list positions: UNLISTED (in no list),
    FIRST_CHUNK (only in its tiles' first chunks), LATER_CHUNKS (only past them) or BOTH. A
    kernel that loses the later chunks, or mixes them up, shows in the LATER_CHUNKS group's
    gradients however small they are next to the first chunks'."""
    ids = flatten_ids.astype(np.int64).ravel()
    n = list_lengths(tile_offsets, ids.size)
    starts = tile_offsets.astype(np.int64).ravel()
    pos = np.arange(ids.size) - np.repeat(starts, n)
    first = pos < CHUNK
    in_first = np.bincount(ids[first], minlength=n_gaussians)[:n_gaussians] > 0
    in_later = np.bincount(ids[~first], minlength=n_gaussians)[:n_gaussians] > 0
    return (in_first * FIRST_CHUNK + in_later * LATER_CHUNKS).astype(np.int8)
