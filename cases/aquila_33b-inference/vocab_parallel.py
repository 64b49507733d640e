"""Scoring on vocabulary-parallel logits, as FlagScale's evaluation scores seed 002.

FlagScale's ``tasks/aquila/evaluate.py`` builds its GPT model with ``parallel_output=True``
for ``--eval-metric loss``: each rank of the tensor-parallel group keeps the logits of its
slice of the vocabulary (1/P of it), and ``tensor_parallel.vocab_parallel_cross_entropy``
(Megatron's ``core/tensor_parallel/cross_entropy.py``) takes the loss from the slices: the
max, the target's logit and the sum of exponentials each all-reduced over the group. No
rank ever holds a full-vocabulary row, which is what keeps the seed's memory at 12.3 GiB.

The group is the whole world (the case's tensor-parallel group spans the node); one
process without a process group scores the whole vocabulary with the same code.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

NO_ID = torch.iinfo(torch.long).max  # a rank without the greedy id offers this to the min


@dataclass(frozen=True)
class Scores:
    nll: float  # summed NLL of every scored next token
    tokens: int  # tokens scored
    right: int  # texts whose last word is greedy-right
    text_loss: float  # summed per-text mean NLL (FlagScale's "avg loss" x texts)

    def __add__(self, other: Scores) -> Scores:
        return Scores(
            self.nll + other.nll,
            self.tokens + other.tokens,
            self.right + other.right,
            self.text_loss + other.text_loss,
        )


def _grouped() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _all_reduce(t: torch.Tensor, op: dist.ReduceOp.RedOpType) -> torch.Tensor:
    if _grouped():
        dist.all_reduce(t, op=op)
    return t


def vocab_start(width: int) -> int:
    """The first vocabulary id of this rank's slice of ``width`` ids (slices in rank order,
    as the output head's rows are split)."""
    if not _grouped():
        return 0
    widths = [0] * dist.get_world_size()
    dist.all_gather_object(widths, width)
    return sum(widths[: dist.get_rank()])


def token_nll(
    logits: torch.Tensor, target: torch.Tensor, start: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each position's negative log-likelihood of ``target`` from this rank's vocabulary
    slice ``logits`` [..., width] starting at id ``start``: Megatron's
    vocab_parallel_cross_entropy (forward, fp32 as FlagScale's ``output.float()``). Also
    each position's highest logit over the whole vocabulary, which ``greedy`` reuses."""
    logits = logits.float()
    peak = _all_reduce(logits.max(-1).values, dist.ReduceOp.MAX)
    shifted = logits - peak.unsqueeze(-1)
    local = target - start
    outside = (local < 0) | (local >= logits.shape[-1])
    picked = shifted.gather(-1, local.masked_fill(outside, 0).unsqueeze(-1)).squeeze(-1)
    picked = _all_reduce(picked.masked_fill(outside, 0.0), dist.ReduceOp.SUM)
    sum_exp = _all_reduce(shifted.exp_().sum(-1), dist.ReduceOp.SUM)
    return sum_exp.log() - picked, peak


def text_means(nll: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Each text's mean NLL over its real next tokens (FlagScale's loss / loss_mask)."""
    return (nll * valid).sum(-1) / valid.sum(-1)


def greedy(logits: torch.Tensor, start: int, peak: torch.Tensor) -> torch.Tensor:
    """The id of the highest logit over the whole vocabulary, the lowest id on a tie (as
    torch.argmax over gathered logits), from each rank's slice and ``peak`` (token_nll's
    highest logit of each position): one all-reduce of one value per position."""
    best, at = logits.max(-1)
    ids = (at + start).masked_fill(best.float() != peak, NO_ID)  # a half is exact as fp32
    return _all_reduce(ids, dist.ReduceOp.MIN)


def tally(
    nll: torch.Tensor, texts: torch.Tensor, predicted: torch.Tensor, batch: dict[str, torch.Tensor]
) -> Scores:
    """A batch's Scores from its next tokens' ``nll``, per-text means ``texts`` and greedy
    ids ``predicted`` (positions 0..T-2 predicting tokens 1..T-1)."""
    valid = batch["attention_mask"][:, 1:].float()
    hit = (predicted == batch["input_ids"][:, 1:]) | ~batch["last_word"][:, :-1]
    return Scores(
        float((nll * valid).sum()), int(valid.sum()), int(hit.all(-1).sum()), float(texts.sum())
    )
