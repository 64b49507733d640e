"""How a run's processes split the work: data, tensor and pipeline parallelism, and which
ranks count samples and tokens (standard library only).

``world = dp x tp x pp``. Ranks are laid out tensor-fastest, then data, then pipeline
(Megatron's order): ``rank = (pp_rank x dp + dp_rank) x tp + tp_rank``. The ranks of one
tensor/pipeline group work on the same batch, so exactly one rank of each group counts it:
tensor rank 0 of the last pipeline stage (the stage that holds the loss). Summed over the
ranks, the counts are then those of the data-parallel replicas, each batch once, and

    tokens_per_s_per_device = group tokens/s / devices in the group
                            = all counted tokens / train time / world

so ``mfu x peak x world = FLOPs per token x tokens/s of all groups`` (docs/harness.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """One rank's place in a ``dp x tp x pp`` grid of ``world`` processes."""

    rank: int = 0
    world: int = 1
    tp: int = 1
    pp: int = 1

    def __post_init__(self) -> None:
        if self.tp < 1 or self.pp < 1 or self.world % (self.tp * self.pp):
            raise ValueError(
                f"{self.world} processes do not split into tensor parallel {self.tp} x "
                f"pipeline parallel {self.pp} groups"
            )

    @property
    def dp(self) -> int:
        """Data-parallel replicas: how many different batches one step trains on."""
        return self.world // (self.tp * self.pp)

    @property
    def tp_rank(self) -> int:
        return self.rank % self.tp

    @property
    def dp_rank(self) -> int:
        return (self.rank // self.tp) % self.dp

    @property
    def pp_rank(self) -> int:
        return self.rank // (self.tp * self.dp)

    @property
    def counts(self) -> bool:
        """Whether this rank counts its group's samples and tokens (one rank per group)."""
        return self.tp_rank == 0 and self.pp_rank == self.pp - 1

    def describe(self) -> str:
        parts = [f"data parallel {self.dp}"]
        parts += [f"tensor parallel {self.tp}"] if self.tp > 1 else []
        parts += [f"pipeline parallel {self.pp}"] if self.pp > 1 else []
        return ", ".join(parts)
