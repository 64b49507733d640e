"""Model FLOPs per token, PaLM (Chowdhery et al. 2022), appendix B.

Symbols: N parameters without embeddings, L layers, H heads, Q head dimension, T sequence
length (the length the device computes on, i.e. padded).

- training, all weights trained: 6N + 12·L·H·Q·T
- training with a frozen base and LoRA adapters: 4N + 6·N_lora + 12·L·H·Q·T
  (the frozen base still runs forward (2N) and backward to the activations (2N), but
  no weight gradients; the adapters take the full 6 per parameter)
- inference (forward only): 2N + 4·L·H·Q·T

Convention for N (fixed by the checked values in tests/unit/test_harness.py): every parameter
except the *input* embedding tables (token, position, token type), which are lookups and
cost no matmul FLOPs. The output projection (lm_head) is a matmul over every token and is
counted, tied to the input embedding or not. For Llama-2-7B this gives N = 6.607e9 and
training 46.1e9 FLOPs/token at T=4096, 40.4e9 at T=512 (excluding lm_head too would give
45.3e9, counting every parameter 46.9e9).

Parts that run once per sequence, not once per token (a sequence classifier's head, e.g.
DistilBERT's pre_classifier and classifier on the first token), are left out of N and
counted per sequence: 6·N_head per sequence in training (``harness.ModelFlops``'s
``per_sequence``). tests/unit/test_flops.py checks each formula against torch's FlopCounterMode.
"""

from __future__ import annotations

from typing import Any


def attention_flops_per_token(n_layers: int, n_heads: int, head_dim: int, seq_len: int) -> int:
    """The training attention term 12·L·H·Q·T (score and value matmuls, forward + backward)."""
    return 12 * n_layers * n_heads * head_dim * seq_len


def training_flops_per_token(
    n_params: int, n_layers: int, n_heads: int, head_dim: int, seq_len: int
) -> int:
    """6N + 12·L·H·Q·T."""
    return 6 * n_params + attention_flops_per_token(n_layers, n_heads, head_dim, seq_len)


def lora_training_flops_per_token(
    n_frozen: int, n_lora: int, n_layers: int, n_heads: int, head_dim: int, seq_len: int
) -> int:
    """4N + 6·N_lora + 12·L·H·Q·T, N the frozen base (without embeddings)."""
    return (
        4 * n_frozen + 6 * n_lora + attention_flops_per_token(n_layers, n_heads, head_dim, seq_len)
    )


def inference_flops_per_token(
    n_params: int, n_layers: int, n_heads: int, head_dim: int, seq_len: int
) -> int:
    """2N + 4·L·H·Q·T."""
    return 2 * n_params + 4 * n_layers * n_heads * head_dim * seq_len


def params_of(*modules: Any) -> int:
    """Number of parameters of ``modules`` together."""
    return sum(p.numel() for m in modules for p in m.parameters())


def non_embedding_params(model: Any) -> int:
    """N of a torch model: all parameters except input embedding tables.

    Every ``torch.nn.Embedding`` counts as an input embedding. An output projection that
    shares its weight with one of them (tied lm_head) is counted once, as the matmul it is.
    """
    import torch

    embedding_ids = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    total = sum(p.numel() for p in model.parameters() if id(p) not in embedding_ids)
    get_out = getattr(model, "get_output_embeddings", None)
    out = get_out() if callable(get_out) else None
    weight = getattr(out, "weight", None)
    if weight is not None and id(weight) in embedding_ids:
        total += weight.numel()
    return total
