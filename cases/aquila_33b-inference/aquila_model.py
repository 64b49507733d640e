"""Aquila as a transformers Llama model, whole or split over a node's devices.

Aquila (BAAI) is a Llama-family decoder: RMSNorm, rotary positions, SwiGLU, grouped-query
attention (Aquila-33B: 60 layers, hidden 6144, 48 heads in 8 key/value groups). Its HF
checkpoints (``model_type: aquila``, remote code) use Llama's tensor names, so the case loads
them with ``LlamaForCausalLM`` from the config's Llama fields.

Tensor parallelism uses transformers' plan for Llama (torch DTensor underneath): q/k/v and the
gate/up projections split by output rows, o_proj and down_proj by input columns (one
all-reduce each per layer). The output head is split over the vocabulary and, unlike the
plan's default, not gathered: each rank's logits are its vocabulary slice, as FlagScale's
``parallel_output=True`` (vocab_parallel.py scores them). Each rank reads only its slices
from the safetensors shards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

LLAMA_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
    "rms_norm_eps",
    "rope_theta",
    "tie_word_embeddings",
)
# weights are held in the precision's type (pure half inference, as FlagScale's fp16)
DTYPES = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "amp": torch.float16,
    "bf16": torch.bfloat16,
}


def llama_config(folder: Path) -> Any:
    """A LlamaConfig from ``folder``/config.json (model_type llama or aquila)."""
    from transformers import LlamaConfig

    path = folder / "config.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: unreadable ({e})") from None
    missing = [k for k in LLAMA_FIELDS[:5] if k not in raw]
    if missing:
        raise ValueError(f"{path}: field {missing[0]} missing")
    return LlamaConfig(**{k: raw[k] for k in LLAMA_FIELDS if k in raw})


def load(folder: Path, precision: str, tp_size: int, device: torch.device) -> Any:
    """LlamaForCausalLM in eval mode; split over ``tp_size`` ranks of the process group, its
    logits each rank's slice of the vocabulary."""
    import transformers
    from transformers import DistributedConfig, LlamaForCausalLM

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    cfg = llama_config(folder)
    if cfg.num_attention_heads % tp_size or cfg.num_key_value_heads % tp_size:
        raise ValueError(
            f"{folder / 'config.json'}: {cfg.num_attention_heads} heads and "
            f"{cfg.num_key_value_heads} key/value groups do not split over {tp_size} ranks"
        )
    dtype = DTYPES[precision]
    if tp_size > 1:
        # the plan's own rules, but the head's logits stay split over the vocabulary
        dist = DistributedConfig(tp_size=tp_size, tp_plan={"lm_head": "colwise"})
        model = LlamaForCausalLM.from_pretrained(
            folder, config=cfg, dtype=dtype, distributed_config=dist
        )
    else:
        model = LlamaForCausalLM.from_pretrained(folder, config=cfg, dtype=dtype).to(device)
    return model.eval()


def head_rows(model: Any) -> int:
    """The vocabulary ids this rank's output head computes logits for."""
    weight = model.lm_head.weight
    return (weight.to_local() if hasattr(weight, "to_local") else weight).shape[0]
