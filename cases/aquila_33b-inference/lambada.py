"""LAMBADA and the Aquila tokenizer: reading the seed's files, batching, scoring.

- ``data/lambada_test_bak.jsonl``: one ``{"text": ...}`` per line (cybertronai/bflm's
  lambada_test.jsonl).
- ``tokenizer/vocab.json``, ``merges.txt``: byte-level BPE (GPT-2 style, as Aquila's);
  ``special_tokens.txt``: one special token per line, added to the vocabulary where absent.

Each text is split at its last space: the context and the last word. The sequence is
``encode(context) + encode(" " + last word)``; the loss is the mean negative log-likelihood of
every token given the ones before it (over all tokens of the set), and a text counts for
last-word accuracy when the greedy prediction of every last-word token is right.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from harness.errors import InputError
from harness.jsonl import json_lines

TOKENIZER_FILES = ("vocab.json", "merges.txt", "special_tokens.txt")


@dataclass(frozen=True)
class Example:
    ids: tuple[int, ...]
    last_word_tokens: int  # the final tokens that make up the last word


def load_tokenizer(folder: Path):  # -> tokenizers.Tokenizer
    from tokenizers import ByteLevelBPETokenizer

    for name in TOKENIZER_FILES:
        if not (folder / name).is_file():
            raise InputError(f"{folder / name}: missing")
    try:
        vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"{folder / 'vocab.json'}: not JSON ({e.msg})") from None
    if not isinstance(vocab, dict) or not vocab:
        raise InputError(f"{folder / 'vocab.json'}: expected an object of token -> id")
    try:
        tok = ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    except Exception as e:  # tokenizers raises its own exception types for bad merges
        raise InputError(f"{folder / 'merges.txt'}: not a BPE merges file ({e})") from None
    specials = (folder / "special_tokens.txt").read_text(encoding="utf-8").split()
    tok.add_special_tokens(specials)
    return tok


def read_lambada(path: Path) -> list[str]:
    """The texts of a LAMBADA jsonl file; InputError naming file:line and field."""
    texts = []
    for where, row in json_lines(path):
        text = row.get("text") if isinstance(row, dict) else None
        if not isinstance(text, str) or " " not in text.strip():
            raise InputError(f"{where}: field 'text' missing or a single word")
        texts.append(text.strip())
    if not texts:
        raise InputError(f"{path}: no texts")
    return texts


def encode(tok, texts: list[str], max_len: int) -> list[Example]:
    """Tokenised examples, the context cut from the left to fit max_len."""
    out = []
    for text in texts:
        context, last = text.rsplit(" ", 1)
        target = tok.encode(" " + last).ids
        ids = tok.encode(context).ids + target
        out.append(Example(tuple(ids[-max_len:]), min(len(target), max_len - 1)))
    return out


def batches(examples: list[Example], size: int) -> list[list[Example]]:
    """Batches of similar lengths (sorted), so little of each is padding."""
    ordered = sorted(examples, key=lambda e: len(e.ids))
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def collate(batch: list[Example], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids`` and ``attention_mask``; ``last_word`` marks the positions
    whose next token is a last-word token."""
    t = max(len(e.ids) for e in batch)
    input_ids = torch.full((len(batch), t), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(batch), t), dtype=torch.long)
    last_word = torch.zeros((len(batch), t), dtype=torch.bool)
    for i, e in enumerate(batch):
        n = len(e.ids)
        input_ids[i, :n] = torch.tensor(e.ids)
        attention_mask[i, :n] = 1
        last_word[i, n - 1 - e.last_word_tokens : n - 1] = True
    return {"input_ids": input_ids, "attention_mask": attention_mask, "last_word": last_word}


def score(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> tuple[float, int, int]:
    """(summed NLL of every next token, tokens scored, texts whose last word is right)."""
    ids, mask = batch["input_ids"], batch["attention_mask"]
    logits = logits[:, :-1].float()
    target, valid = ids[:, 1:], mask[:, 1:].bool()
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, reduction="none")
    hit = (logits.argmax(-1) == target) | ~batch["last_word"][:, :-1]
    return float(nll[valid].sum()), int(valid.sum()), int(hit.all(-1).sum())
