"""SST-2 for distilbert-pytorch: GLUE's TSVs, FlagPerf's pre-tokenised .npz, the batches.

prepare.py stages FlagPerf's layout, ``dataset/train_dataset.npz`` and ``eval_dataset.npz``
as its ``data_preprocessing/create_train_eval_data.py`` wrote them (f3c253a0: arrays idx,
sentence, label, input_ids, attention_mask, every row padded to the tokenizer's 512), so
that run.py reads token ids as FlagPerf's ``DistilBertDataset`` does and tokenises nothing.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import harness
import numpy as np

TRAIN, DEV = "dataset/train_dataset.npz", "dataset/eval_dataset.npz"
PADDED = 512  # create_train_eval_data.py: padding="max_length", distilbert's 512 positions
Row = tuple[np.ndarray, np.ndarray, int]  # input_ids, attention_mask (max_len each), label


def read_tsv(path: Path) -> list[tuple[str, int]]:
    """GLUE SST-2 TSV (header "sentence<TAB>label", no quoting) -> [(sentence, label)]."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, [])
        if "sentence" not in header or "label" not in header:
            raise harness.InputError(f"{path}: header must have 'sentence' and 'label' columns")
        s, y = header.index("sentence"), header.index("label")
        return [(row[s], int(row[y])) for row in reader if row]


def write_npz(path: Path, rows: list[tuple[str, int]], tokenizer: Any) -> None:
    """``rows`` tokenised and saved as create_train_eval_data.py saves them."""
    sentences = [text for text, _ in rows]
    enc = tokenizer(sentences, padding="max_length", truncation=True, max_length=PADDED)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # never write through a staged link
    np.savez(
        path,
        idx=np.arange(len(rows)),
        sentence=np.array(sentences, dtype=str),
        label=np.array([label for _, label in rows]),
        input_ids=np.array(enc["input_ids"], dtype=np.int32),
        attention_mask=np.array(enc["attention_mask"], dtype=np.int8),
    )


def load(path: Path, max_len: int) -> list[Row]:
    """The rows of a prepared .npz, cut to ``max_len`` tokens where that is below the file's
    width (a longer row keeps its last token, [SEP], as the tokenizer's truncation does)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            ids, mask, labels = f["input_ids"], f["attention_mask"], f["label"].tolist()
    except (OSError, ValueError, KeyError) as e:
        raise harness.InputError(f"{path}: {e} (run the case's prepare step)") from None
    if max_len > ids.shape[1]:
        raise harness.InputError(f"{path}: rows of {ids.shape[1]} tokens, under {max_len}")
    lengths = mask.sum(axis=1)
    last = ids[np.arange(len(ids)), np.maximum(lengths - 1, 0)]
    ids, mask = ids[:, :max_len].copy(), mask[:, :max_len]
    cut = lengths > max_len
    ids[cut, max_len - 1] = last[cut]
    return list(zip(ids, mask, labels, strict=True))


def collate(batch: list[Row]) -> dict[str, Any]:
    """Stack padded rows, as FlagPerf's default_data_collator (B x max_len tokens always)."""
    import torch

    mask = np.stack([m for _, m, _ in batch])
    return {
        "input_ids": torch.from_numpy(np.stack([i for i, _, _ in batch]).astype(np.int64)),
        "attention_mask": torch.from_numpy(mask.astype(np.int64)),
        "labels": torch.tensor([label for _, _, label in batch]),
        "real_tokens": int(mask.sum()),
    }
