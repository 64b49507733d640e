"""The order a training loader gives its rows, epoch after epoch (hp ``epoch_order``).

- ``flagperf``: what FlagPerf's trainers ran (e.g. distilbert's dataloader.py at f3c253a0).
  Without a process group (one process): ``RandomSampler`` with one generator seeded hp
  ``seed``, made once, so each epoch draws its order from where the last left the generator.
  With one (several processes): ``DistributedSampler(seed=seed)``, whose ``set_epoch`` the
  trainer never calls, so every epoch repeats epoch 0's order (a defect: the case keeps it
  so that the seed rows run as published).
- ``reshuffle``: fleetperf's own: ``DistributedSampler`` with ``set_epoch`` at every epoch
  (``Run.train`` calls it), a fresh order per epoch on any number of processes.

Pass the sampler to ``Run.train_loader``; its batches are whole batches only either way.
"""

from __future__ import annotations

from collections.abc import Sized

import torch
from torch.utils.data import DistributedSampler, RandomSampler, Sampler

ORDERS = {
    "flagperf": "FlagPerf's samplers: one process, RandomSampler with one generator seeded "
    "hp seed (each epoch a new order); several, DistributedSampler never told the epoch "
    "(every epoch epoch 0's order)",
    "reshuffle": "fleetperf's own: DistributedSampler told each epoch (a new order per epoch "
    "on every process count), not FlagPerf's",
}


class EpochZeroSampler(DistributedSampler):
    """A ``DistributedSampler`` that ignores ``set_epoch``: every epoch epoch 0's order, as
    under FlagPerf's trainers, which never call it."""

    def set_epoch(self, epoch: int) -> None:
        del epoch  # the epoch stays 0


def epoch_sampler(rows: Sized, order: str, replicas: int, rank: int, seed: int) -> Sampler:
    """The sampler of ``order`` (``ORDERS``) over ``rows`` for data-parallel ``rank`` of
    ``replicas``, seeded ``seed``."""
    if order not in ORDERS:
        raise ValueError(f"epoch order {order!r}: expected one of {sorted(ORDERS)}")
    if order == "flagperf" and replicas == 1:
        return RandomSampler(rows, generator=torch.Generator().manual_seed(seed))
    sampler = EpochZeroSampler if order == "flagperf" else DistributedSampler
    return sampler(rows, num_replicas=replicas, rank=rank, shuffle=True, seed=seed, drop_last=True)
