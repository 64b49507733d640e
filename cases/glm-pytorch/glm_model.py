"""GLM (Du et al. 2022, "GLM: General Language Model Pretraining with Autoregressive Blank
Infilling") in plain PyTorch, with the module names of THUDM/GLM's ``GLMModel`` so that the
released checkpoints' state dict (``mp_rank_00_model_states.pt``, model parallel 1) loads as is:

    word_embeddings.weight
    transformer.position_embeddings.weight          (max_sequence_length + 1 rows)
    transformer.block_position_embeddings.weight    (max_sequence_length + 1 rows)
    transformer.layers.N.input_layernorm.{weight,bias}
    transformer.layers.N.attention.query_key_value.{weight,bias}
    transformer.layers.N.attention.dense.{weight,bias}
    transformer.layers.N.post_attention_layernorm.{weight,bias}
    transformer.layers.N.mlp.dense_h_to_4h.{weight,bias}
    transformer.layers.N.mlp.dense_4h_to_h.{weight,bias}
    transformer.final_layernorm.{weight,bias}

Pre-LayerNorm GPT-2 style layers (GeLU, tanh form), output logits tied to the word embeddings.
The two GLM-specific parts:

- the blank-infilling attention mask: with ``sep`` the length of part A (the corrupted text),
  every token sees all of part A and part B tokens see the part B tokens before them
  (key j is visible to query i when j < sep or j <= i);
- 2D positional encoding: ``position_ids[:, 0]`` the position in the corrupted text (a part B
  token takes the position of its [MASK]), ``position_ids[:, 1]`` the position inside its
  span (0 in part A, 1.. in part B).
"""

from __future__ import annotations

import argparse
import math
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

LAYERNORM_EPS = 1e-5
STATE_DICT_PREFIX = "transformer.layers."


@dataclass(frozen=True)
class GLMConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    max_sequence_length: int
    dropout: float = 0.1
    # recompute each layer's activations in the backward pass (GLM's --checkpoint-activations)
    checkpoint_activations: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @classmethod
    def from_state_dict(
        cls,
        sd: Mapping[str, torch.Tensor],
        num_heads: int,
        dropout: float = 0.1,
        checkpoint_activations: bool = False,
    ) -> GLMConfig:
        """The shape a GLM state dict implies; the head count is not in the weights."""
        vocab, hidden = sd["word_embeddings.weight"].shape
        layers = {k.split(".")[2] for k in sd if k.startswith(STATE_DICT_PREFIX)}
        positions = sd["transformer.position_embeddings.weight"].shape[0] - 1
        if hidden % num_heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of {num_heads} heads")
        return cls(
            vocab, hidden, len(layers), num_heads, positions, dropout, checkpoint_activations
        )


def blank_infilling_mask(sep: torch.Tensor, seq_len: int) -> torch.Tensor:
    """[B, T, T] bool, True where query i may attend to key j: j < sep[b] or j <= i."""
    idx = torch.arange(seq_len, device=sep.device)
    causal = idx.view(1, -1) <= idx.view(-1, 1)  # [T(query), T(key)]
    context = idx.view(1, 1, -1) < sep.view(-1, 1, 1)  # [B, 1, T(key)]
    return causal.unsqueeze(0) | context


def blank_infilling(
    tokens: Sequence[int], spans: Sequence[tuple[int, int]], mask_id: int, sop_id: int, eop_id: int
) -> dict[str, list[int] | int]:
    """One GLM sample: ``tokens`` with each ``[start, end)`` span replaced by a [MASK] in part A,
    and the spans, in the order given, appended as part B (paper, figure 2).

    Returns ``input_ids`` (part A, then [S] + span for each span), ``position_ids`` and
    ``block_position_ids`` (the 2D positions), ``targets`` and ``loss_mask`` (span + [E] at the
    part B positions) and ``sep`` (the length of part A).
    """
    starts = {start: end for start, end in spans}
    part_a: list[int] = []
    mask_at: dict[tuple[int, int], int] = {}
    i = 0
    while i < len(tokens):
        if i in starts:
            mask_at[(i, starts[i])] = len(part_a)
            part_a.append(mask_id)
            i = starts[i]
        else:
            part_a.append(tokens[i])
            i += 1
    sep = len(part_a)
    ids, pos, block = list(part_a), list(range(sep)), [0] * sep
    targets, loss_mask = [0] * sep, [0] * sep
    for start, end in spans:
        span = list(tokens[start:end])
        ids += [sop_id, *span]
        pos += [mask_at[(start, end)]] * (len(span) + 1)
        block += list(range(1, len(span) + 2))
        targets += [*span, eop_id]
        loss_mask += [1] * (len(span) + 1)
    return {
        "input_ids": ids,
        "position_ids": pos,
        "block_position_ids": block,
        "targets": targets,
        "loss_mask": loss_mask,
        "sep": sep,
    }


def gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")  # OpenAI's GeLU, as GLM


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, dropout_p: float
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v where ``mask`` (bool) is True: torch's fused
    scaled_dot_product_attention where it has one (torch >= 2.0), else the same math
    written out, as seed 000's Iluvatar stack (torch 1.13.1) needs."""
    fused = getattr(F, "scaled_dot_product_attention", None)
    if fused is not None:
        return fused(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    return attention_math(q, k, v, mask, dropout_p)


def attention_math(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, dropout_p: float
) -> torch.Tensor:
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return F.dropout(weights, dropout_p) @ v


class SelfAttention(nn.Module):
    def __init__(self, cfg: GLMConfig) -> None:
        super().__init__()
        self.num_heads, self.dropout = cfg.num_heads, cfg.dropout
        self.query_key_value = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.output_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        # GLM's query_key_value output is [q | k | v] along the last dimension
        q, k, v = self.query_key_value(x).view(b, t, 3, self.num_heads, -1).unbind(2)
        out = attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            mask.unsqueeze(1),
            self.dropout if self.training else 0.0,
        )
        return self.output_dropout(self.dense(out.transpose(1, 2).reshape(b, t, h)))


class MLP(nn.Module):
    def __init__(self, cfg: GLMConfig) -> None:
        super().__init__()
        self.dense_h_to_4h = nn.Linear(cfg.hidden_size, 4 * cfg.hidden_size)
        self.dense_4h_to_h = nn.Linear(4 * cfg.hidden_size, cfg.hidden_size)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.dense_4h_to_h(gelu(self.dense_h_to_4h(x))))


class TransformerLayer(nn.Module):
    def __init__(self, cfg: GLMConfig) -> None:
        super().__init__()
        self.input_layernorm = nn.LayerNorm(cfg.hidden_size, eps=LAYERNORM_EPS)
        self.attention = SelfAttention(cfg)
        self.post_attention_layernorm = nn.LayerNorm(cfg.hidden_size, eps=LAYERNORM_EPS)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.input_layernorm(x), mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Transformer(nn.Module):
    def __init__(self, cfg: GLMConfig) -> None:
        super().__init__()
        rows = cfg.max_sequence_length + 1
        self.position_embeddings = nn.Embedding(rows, cfg.hidden_size)
        self.block_position_embeddings = nn.Embedding(rows, cfg.hidden_size)
        self.embedding_dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(TransformerLayer(cfg) for _ in range(cfg.num_layers))
        self.final_layernorm = nn.LayerNorm(cfg.hidden_size, eps=LAYERNORM_EPS)
        self.checkpoint_activations = cfg.checkpoint_activations

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, sep: torch.Tensor
    ) -> torch.Tensor:
        x = x + self.position_embeddings(position_ids[:, 0])
        x = x + self.block_position_embeddings(position_ids[:, 1])
        x = self.embedding_dropout(x)
        mask = blank_infilling_mask(sep, x.shape[1])
        for layer in self.layers:
            if self.checkpoint_activations and self.training:
                x = checkpoint(layer, x, mask, use_reentrant=False)
            else:
                x = layer(x, mask)
        return self.final_layernorm(x)


class GLMModel(nn.Module):
    def __init__(self, cfg: GLMConfig) -> None:
        super().__init__()
        self.config = cfg
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.transformer = Transformer(cfg)
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        """GLM's initialisation: N(0, 0.02), output projections scaled by 1/sqrt(2L)."""
        out_std = std / math.sqrt(2.0 * self.config.num_layers)
        for name, p in self.named_parameters():
            if "layernorm" in name:
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                scaled = name.endswith(("attention.dense.weight", "dense_4h_to_h.weight"))
                nn.init.normal_(p, 0.0, out_std if scaled else std)

    def forward(
        self, input_ids: torch.Tensor, position_ids: torch.Tensor, sep: torch.Tensor
    ) -> torch.Tensor:
        """Final hidden states [B, T, hidden]; logits are these times word_embeddings.weight."""
        return self.transformer(self.word_embeddings(input_ids), position_ids, sep)


class MultiTokenCloze(nn.Module):
    """Scores candidates by the log-likelihood of their tokens filling a blank.

    Takes one sequence per candidate (``input_ids``, ``position_ids`` [N, 2, T], ``sep``,
    ``targets`` and ``target_mask`` over the part B positions, ``choice_index`` [N, 2] the
    candidate's slot (question, choice), ``real_choice`` [N] False for a padding sequence);
    returns [questions, max choices] log-likelihoods with -inf in unused and padding slots
    (FlagPerf masks its padding choices' logits the same way). Logits are computed at the
    target positions only.
    """

    def __init__(self, glm: GLMModel) -> None:
        super().__init__()
        self.glm = glm

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        sep: torch.Tensor,
        targets: torch.Tensor,
        target_mask: torch.Tensor,
        choice_index: torch.Tensor,
        real_choice: torch.Tensor | None = None,
    ) -> torch.Tensor:
        hidden = self.glm(input_ids, position_ids, sep)
        logits = hidden[target_mask] @ self.glm.word_embeddings.weight.T  # [targets, vocab]
        token_lp = logits.float().log_softmax(-1).gather(-1, targets[target_mask].unsqueeze(-1))
        n = target_mask.shape[0]
        seq_of_token = torch.arange(n, device=sep.device).repeat_interleave(target_mask.sum(1))
        per_seq = torch.zeros(n, device=sep.device).index_add_(0, seq_of_token, token_lp[:, 0])
        if real_choice is not None:
            per_seq = per_seq.masked_fill(~real_choice, float("-inf"))
        n_q, n_c = (int(v) + 1 for v in choice_index.max(0).values)
        scores = torch.full((n_q, n_c), float("-inf"), device=sep.device)
        return scores.index_put((choice_index[:, 0], choice_index[:, 1]), per_seq)


def load_state_dict_file(path: Any) -> dict[str, torch.Tensor]:
    """A GLM checkpoint file: DeepSpeed's {"module": state dict, ...} or a bare state dict.

    Read with torch's weights-only unpickler (argparse.Namespace allowed: DeepSpeed stores
    the run's arguments); ValueError naming the file when it is not a GLM state dict.
    """
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path}: not a readable torch checkpoint ({first})") from None
    if isinstance(obj, dict) and isinstance(obj.get("module"), dict):
        obj = obj["module"]
    if not isinstance(obj, dict) or "word_embeddings.weight" not in obj:
        raise ValueError(f"{path}: no GLM state dict (no 'word_embeddings.weight' key)")
    return obj
