"""Megatron-LM tensor-parallel checkpoints (the layout FlagScale writes for Aquila) <-> HF Llama.

The seed's layout::

    ckpts/latest_checkpointed_iteration.txt        "135000" (or "release")
    ckpts/iter_0135000/mp_rank_00/model_optim_rng.pt
    ...
    ckpts/iter_0135000/mp_rank_07/model_optim_rng.pt

Each ``model_optim_rng.pt`` holds ``args`` (argparse.Namespace: the model's shape) and
``model.language_model`` with ``embedding.word_embeddings.weight`` (vocabulary rows split over
ranks), ``encoder`` (``layers.N.*`` and the final norm) and ``output_layer.weight`` (rows split
over ranks). Per layer and rank:

- ``self_attention.query_key_value.weight``: for each of the rank's key/value groups, that
  group's query heads, then its key head, then its value head (rows of head_dim each);
- ``self_attention.dense.weight`` and ``mlp.dense_4h_to_h.weight``: columns split over ranks;
- ``mlp.dense_h_to_4h.weight``: the rank's SwiGLU gate rows, then its up rows;
- ``input_layernorm`` / ``post_attention_layernorm`` (``input_norm`` / ``post_attention_norm``
  in later Megatron-LM): RMSNorm weights, replicated.

Megatron's rotary embedding rotates the two halves of each head (as HF Llama does), so query
and key rows need no permutation. The files are read with torch's weights-only unpickler
(argparse.Namespace and numpy's RNG-state arrays allowed): no FlagScale or Megatron import.
Pipeline-parallel checkpoints (``mp_rank_00_000``) are not supported.
"""

from __future__ import annotations

import argparse
import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

LATEST = "latest_checkpointed_iteration.txt"
CHECKPOINT_FILE = "model_optim_rng.pt"
SHARD_BYTES = 4 * 2**30  # HF shard size of the converted checkpoint


class MegatronError(ValueError):
    """A missing or malformed Megatron checkpoint file: the message names it."""


def _safe_globals() -> list[Any]:
    """argparse.Namespace (args) and the numpy types of rng_state, under both numpy spellings."""
    allowed: list[Any] = [argparse.Namespace]
    try:
        import numpy as np
    except ImportError:
        return allowed
    core = getattr(np, "_core", None) or np.core
    reconstruct = core.multiarray._reconstruct
    allowed += [
        (reconstruct, f"{m}.multiarray._reconstruct") for m in ("numpy.core", "numpy._core")
    ]
    allowed += [np.ndarray, np.dtype] + [
        type(np.dtype(t)) for t in (np.uint32, np.float64, np.int64)
    ]
    return allowed


def iteration_dir(ckpts: Path) -> Path:
    latest = ckpts / LATEST
    if not latest.is_file():
        raise MegatronError(f"{latest}: missing")
    text = latest.read_text().strip()
    if text == "release":
        name = "release"
    elif text.isdigit():
        name = f"iter_{int(text):07d}"
    else:
        raise MegatronError(f"{latest}: expected an iteration number or 'release', got {text!r}")
    folder = ckpts / name
    if not folder.is_dir():
        raise MegatronError(f"{folder}: missing (named by {latest})")
    return folder


def rank_files(ckpts: Path) -> list[Path]:
    folder = iteration_dir(ckpts)
    if any(folder.glob("mp_rank_*_*")):
        raise MegatronError(f"{folder}: pipeline-parallel ranks (mp_rank_XX_YYY) not supported")
    files = [
        folder / f"mp_rank_{r:02d}" / CHECKPOINT_FILE
        for r in range(len(list(folder.glob("mp_rank_*"))))
    ]
    if not files:
        raise MegatronError(f"{folder / 'mp_rank_00' / CHECKPOINT_FILE}: missing")
    for f in files:
        if not f.is_file():
            raise MegatronError(f"{f}: missing")
    return files


def load_rank(path: Path) -> dict[str, Any]:
    try:
        with torch.serialization.safe_globals(_safe_globals()):
            obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise MegatronError(f"{path}: not a readable checkpoint ({first})") from None
    if not isinstance(obj, dict) or "model" not in obj or "args" not in obj:
        raise MegatronError(f"{path}: no 'model' and 'args' entries")
    lm = obj["model"].get("language_model") if isinstance(obj["model"], dict) else None
    if not isinstance(lm, dict) or not {"embedding", "encoder"} <= set(lm):
        raise MegatronError(f"{path}: model.language_model lacks embedding or encoder")
    return obj


def hf_config(args: argparse.Namespace, tp: int, path: Path) -> dict[str, Any]:
    """HF Llama config.json fields from Megatron's args."""

    def need(name: str) -> Any:
        if not hasattr(args, name):
            raise MegatronError(f"{path}: args.{name} missing")
        return getattr(args, name)

    heads = need("num_attention_heads")
    groups = (
        getattr(args, "num_query_groups", None)
        if getattr(args, "group_query_attention", False)
        else None
    )
    if getattr(args, "tensor_model_parallel_size", tp) != tp:
        raise MegatronError(f"{path}: args.tensor_model_parallel_size is not the {tp} rank folders")
    eps = getattr(args, "norm_epsilon", getattr(args, "layernorm_epsilon", 1e-5))
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": need("padded_vocab_size"),
        "hidden_size": need("hidden_size"),
        "intermediate_size": need("ffn_hidden_size"),
        "num_hidden_layers": need("num_layers"),
        "num_attention_heads": heads,
        "num_key_value_heads": groups or heads,
        "max_position_embeddings": need("max_position_embeddings"),
        "rms_norm_eps": eps,
        "rope_theta": float(getattr(args, "rotary_base", 10000)),
        "tie_word_embeddings": not getattr(args, "untie_embeddings_and_output_weights", True),
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
    }


def _norm(
    enc: dict[str, torch.Tensor], prefix: str, names: tuple[str, str], path: Path
) -> torch.Tensor:
    for name in names:
        if f"{prefix}{name}.weight" in enc:
            return enc[f"{prefix}{name}.weight"]
    raise MegatronError(f"{path}: encoder lacks {prefix}{names[0]}.weight")


def hf_tensors(
    ranks: list[dict[str, Any]], cfg: dict[str, Any], paths: list[Path]
) -> Iterator[tuple[str, torch.Tensor]]:
    """(HF name, tensor) pairs, layer by layer, from every rank's state."""
    lms = [r["model"]["language_model"] for r in ranks]
    encs = [lm["encoder"] for lm in lms]
    heads, groups = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg["hidden_size"] // heads
    per_group = heads // groups
    try:
        yield (
            "model.embed_tokens.weight",
            torch.cat([lm["embedding"]["word_embeddings"]["weight"] for lm in lms]),
        )
        for i in range(cfg["num_hidden_layers"]):
            p = f"layers.{i}."
            q, k, v = [], [], []
            for enc in encs:
                qkv = enc[p + "self_attention.query_key_value.weight"]
                qkv = qkv.view(-1, per_group + 2, head_dim, qkv.shape[-1])
                q.append(qkv[:, :per_group].reshape(-1, qkv.shape[-1]))
                k.append(qkv[:, per_group].reshape(-1, qkv.shape[-1]))
                v.append(qkv[:, per_group + 1].reshape(-1, qkv.shape[-1]))
            gate, up = zip(
                *(enc[p + "mlp.dense_h_to_4h.weight"].chunk(2) for enc in encs), strict=True
            )
            out = f"model.layers.{i}."
            yield out + "self_attn.q_proj.weight", torch.cat(q)
            yield out + "self_attn.k_proj.weight", torch.cat(k)
            yield out + "self_attn.v_proj.weight", torch.cat(v)
            yield (
                out + "self_attn.o_proj.weight",
                torch.cat([e[p + "self_attention.dense.weight"] for e in encs], 1),
            )
            yield out + "mlp.gate_proj.weight", torch.cat(gate)
            yield out + "mlp.up_proj.weight", torch.cat(up)
            yield (
                out + "mlp.down_proj.weight",
                torch.cat([e[p + "mlp.dense_4h_to_h.weight"] for e in encs], 1),
            )
            yield (
                out + "input_layernorm.weight",
                _norm(encs[0], p, ("input_layernorm", "input_norm"), paths[0]),
            )
            yield (
                out + "post_attention_layernorm.weight",
                _norm(encs[0], p, ("post_attention_layernorm", "post_attention_norm"), paths[0]),
            )
        yield "model.norm.weight", _norm(encs[0], "", ("final_layernorm", "final_norm"), paths[0])
        if not cfg["tie_word_embeddings"]:
            yield "lm_head.weight", torch.cat([lm["output_layer"]["weight"] for lm in lms])
    except KeyError as e:
        raise MegatronError(f"{paths[0].parent.parent}: a rank lacks {e}") from None


def convert(ckpts: Path, out: Path) -> dict[str, Any]:
    """Write ``out``/config.json and HF safetensors shards with an index; returns the config."""
    from safetensors.torch import save_file

    paths = rank_files(ckpts)
    ranks = [load_rank(p) for p in paths]
    cfg = hf_config(ranks[0]["args"], len(ranks), paths[0])
    dtype = next(iter(ranks[0]["model"]["language_model"]["encoder"].values())).dtype
    cfg["torch_dtype"] = str(dtype).removeprefix("torch.")
    out.mkdir(parents=True, exist_ok=True)
    weight_map: dict[str, str] = {}
    shard: dict[str, torch.Tensor] = {}
    names: list[str] = []

    def flush() -> None:
        name = f"model-{len(names) + 1:05d}.safetensors"
        save_file(shard, out / name, metadata={"format": "pt"})
        names.append(name)
        weight_map.update(dict.fromkeys(shard, name))
        shard.clear()

    size = 0
    for key, tensor in hf_tensors(ranks, cfg, paths):
        shard[key] = tensor.contiguous().clone()
        size += tensor.numel() * tensor.element_size()
        if size >= SHARD_BYTES:
            flush()
            size = 0
    if shard:
        flush()
    # HF names shards model-0000i-of-0000n: rename now that n is known
    total = 0
    for i, name in enumerate(names, 1):
        final = f"model-{i:05d}-of-{len(names):05d}.safetensors"
        (out / name).rename(out / final)
        total += (out / final).stat().st_size
        weight_map = {k: (final if v == name else v) for k, v in weight_map.items()}
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return cfg


def split(state: dict[str, torch.Tensor], cfg: dict[str, Any], tp: int) -> list[dict[str, Any]]:
    """The inverse of ``hf_tensors``: an HF Llama state dict as ``tp`` Megatron rank states."""
    heads, groups = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg["hidden_size"] // heads
    per_group = heads // groups
    ranks: list[dict[str, Any]] = [{} for _ in range(tp)]

    def rows(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return t.chunk(tp)

    def cols(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return t.chunk(tp, dim=1)

    for i in range(cfg["num_hidden_layers"]):
        src, p = f"model.layers.{i}.", f"layers.{i}."
        h = state[src + "self_attn.q_proj.weight"].shape[1]
        q = state[src + "self_attn.q_proj.weight"].view(groups, per_group, head_dim, h)
        k = state[src + "self_attn.k_proj.weight"].view(groups, 1, head_dim, h)
        v = state[src + "self_attn.v_proj.weight"].view(groups, 1, head_dim, h)
        qkv = torch.cat([q, k, v], 1)  # [groups, per_group + 2, head_dim, h]
        gate, up = (
            rows(state[src + "mlp.gate_proj.weight"]),
            rows(state[src + "mlp.up_proj.weight"]),
        )
        for r in range(tp):
            enc = ranks[r]
            enc[p + "self_attention.query_key_value.weight"] = (
                qkv.chunk(tp)[r].reshape(-1, h).clone()
            )
            enc[p + "self_attention.dense.weight"] = cols(state[src + "self_attn.o_proj.weight"])[
                r
            ].clone()
            enc[p + "mlp.dense_h_to_4h.weight"] = torch.cat([gate[r], up[r]]).clone()
            enc[p + "mlp.dense_4h_to_h.weight"] = cols(state[src + "mlp.down_proj.weight"])[
                r
            ].clone()
            enc[p + "input_layernorm.weight"] = state[src + "input_layernorm.weight"].clone()
            enc[p + "post_attention_layernorm.weight"] = state[
                src + "post_attention_layernorm.weight"
            ].clone()
    out = []
    for r in range(tp):
        ranks[r]["final_layernorm.weight"] = state["model.norm.weight"].clone()
        lm = {
            "embedding": {
                "word_embeddings": {"weight": rows(state["model.embed_tokens.weight"])[r].clone()}
            },
            "encoder": ranks[r],
            "output_layer": {"weight": rows(state["lm_head.weight"])[r].clone()},
        }
        out.append({"model": {"language_model": lm}})
    return out


def megatron_args(cfg: dict[str, Any], tp: int, seq_length: int) -> argparse.Namespace:
    """The shape entries of Megatron's args for an HF Llama config."""
    return argparse.Namespace(
        num_layers=cfg["num_hidden_layers"],
        hidden_size=cfg["hidden_size"],
        ffn_hidden_size=cfg["intermediate_size"],
        num_attention_heads=cfg["num_attention_heads"],
        group_query_attention=True,
        num_query_groups=cfg["num_key_value_heads"],
        padded_vocab_size=cfg["vocab_size"],
        max_position_embeddings=cfg["max_position_embeddings"],
        seq_length=seq_length,
        norm_epsilon=cfg["rms_norm_eps"],
        rotary_base=cfg.get("rope_theta", 10000),
        swiglu=True,
        untie_embeddings_and_output_weights=True,
        tensor_model_parallel_size=tp,
    )


def write_megatron(
    state: dict[str, torch.Tensor],
    cfg: dict[str, Any],
    tp: int,
    ckpts: Path,
    iteration: int,
    seq_length: int,
) -> None:
    """Save an HF Llama state dict in the seed's Megatron layout, ``tp`` ranks."""
    folder = ckpts / f"iter_{iteration:07d}"
    args = megatron_args(cfg, tp, seq_length)
    for r, rank in enumerate(split(state, cfg, tp)):
        (folder / f"mp_rank_{r:02d}").mkdir(parents=True, exist_ok=True)
        rank.update(args=args, iteration=iteration, checkpoint_version=3.0)
        torch.save(rank, folder / f"mp_rank_{r:02d}" / CHECKPOINT_FILE)
    (ckpts / LATEST).write_text(f"{iteration}\n")
