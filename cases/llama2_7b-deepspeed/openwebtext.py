"""The case's data layout and the checked loading of its token array."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from harness import InputError

MODEL_DIR = "llama2_7b_hf"  # config.json: the model's shape
TOKENS = "openwebtext_llama2_100M.npy"  # flat token ids (preprocess.py)
# Kunlunxin's FC tiling table, optional: FlagPerf's R300 row points XPU_FC_AUTOTUNE_FILE at it
FC_AUTOTUNE = "fc_autotune_fp16.log"


def load_tokens(path: Path, vocab_size: int) -> np.ndarray:
    """The token array, memory-mapped; InputError unless it is 1-D ids below vocab_size."""
    try:
        tokens = np.load(path, mmap_mode="r")
    except FileNotFoundError:
        raise InputError(f"missing data: {path}") from None
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a .npy array: {e}") from None
    if tokens.ndim != 1 or tokens.dtype.kind not in "iu" or len(tokens) == 0:
        raise InputError(f"{path}: expected a flat array of token ids, got {tokens.dtype}")
    top = int(tokens.max())
    if top >= vocab_size or int(tokens.min()) < 0:
        raise InputError(f"{path}: token id {top} outside the vocabulary of {vocab_size}")
    return tokens


def sequences(idx: list[int], tokens: np.ndarray, seq: int) -> Any:
    """The batch (a torch tensor) of sequences numbered ``idx``, cut from the flat array."""
    import torch

    return torch.from_numpy(
        np.stack([tokens[i * seq : (i + 1) * seq] for i in idx]).astype(np.int64)
    )
