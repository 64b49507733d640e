"""samsum training data: dialogue/summary JSON records -> prompts -> 512-token packed blocks.

The file is samsum's own layout, a JSON array of objects with string fields "dialogue" and
"summary" (and "id", unused). Each record becomes llama-recipes' prompt (FlagPerf's case)

    Summarize this dialog:\\n{dialogue}\\n---\\nSummary:\\n{summary}</s>

the prompts are tokenized, concatenated and cut into blocks of exactly ``block`` tokens; the
remainder shorter than one block is dropped. Labels are the inputs (causal LM), so every
token of a block is a real token: there is no padding.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from harness import InputError

# Where the data directory holds samsum's files: FlagPerf's dataset_dir (config_A100x1x1.py).
DIR = "samsum_dataset"
TRAIN_JSON = f"{DIR}/train.json"
PROMPT = "Summarize this dialog:\n{dialogue}\n---\nSummary:\n{summary}{eos}"


def read_records(path: Path) -> list[dict[str, str]]:
    """The records of a samsum JSON file; InputError naming the file and the bad record."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"missing data: {path}") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{path}: not a JSON file: {e}") from None
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: expected a non-empty JSON array of dialogue/summary records")
    for i, rec in enumerate(data):
        fields = ("dialogue", "summary")
        if not isinstance(rec, dict) or not all(isinstance(rec.get(k), str) for k in fields):
            raise InputError(f"{path}: record {i}: needs string fields 'dialogue' and 'summary'")
    return data


def pack(records: list[dict[str, str]], tokenizer: Any, block: int) -> torch.Tensor:
    """Blocks of ``block`` token ids (shape [n, block]) from the records' prompts."""
    eos = tokenizer.eos_token or ""
    texts = [PROMPT.format(dialogue=r["dialogue"], summary=r["summary"], eos=eos) for r in records]
    ids = [i for seq in tokenizer(texts)["input_ids"] for i in seq]
    n = len(ids) // block
    return torch.tensor(ids[: n * block], dtype=torch.long).view(n, block)
