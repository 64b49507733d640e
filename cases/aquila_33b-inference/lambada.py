"""LAMBADA and the Aquila tokenizer: reading the seed's files, framing, batching.

- ``data/lambada_test_bak.jsonl``: one ``{"text": ...}`` per line (cybertronai/bflm's
  lambada_test.jsonl).
- ``tokenizer/vocab.json``, ``merges.txt``: byte-level BPE (GPT-2 style, as Aquila's);
  ``special_tokens.txt``: one special token per line, added to the vocabulary where absent.

Two framings (hp ``framing``):

- ``flagscale`` (seed 002, FlagScale's ``tasks/aquila/datasets.py``): the text cut to
  ``max_len`` characters, ``[CLS] + encode(text) + </s>``, cut to ``max_len`` tokens and
  padded to ``max_len``: every text computes ``max_len`` positions, causal mask only.
- ``plain``: ``encode(context) + encode(" " + last word)``, padded to the batch's longest,
  with an attention mask.

Scoring (vocab_parallel.py) reads ``collate``'s ``last_word``: a text counts for last-word
accuracy when the greedy prediction of every last-word token is right.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from harness.errors import InputError
from harness.jsonl import json_lines

TOKENIZER_FILES = ("vocab.json", "merges.txt", "special_tokens.txt")
CLS, EOD = "[CLS]", "</s>"  # FlagScale's AquilaTokenizer: cls and eod


@dataclass(frozen=True)
class Example:
    ids: tuple[int, ...]
    last_word_tokens: int  # the tokens that make up the last word
    tail: int = 0  # tokens after the last word (FlagScale's </s>)


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


def special_ids(tok, folder: Path) -> tuple[int, int]:
    """FlagScale's [CLS] and </s> ids; InputError naming special_tokens.txt without them."""
    ids = tok.token_to_id(CLS), tok.token_to_id(EOD)
    if None in ids:
        raise InputError(
            f"{folder / 'special_tokens.txt'}: needs {CLS} and {EOD} for FlagScale's framing "
            "(framing=flagscale); stage the seed's tokenizer, or prepare --synthetic again"
        )
    return ids


def encode(tok, texts: list[str], max_len: int) -> list[Example]:
    """Plain framing: context + " " + last word, the context cut from the left to fit."""
    out = []
    for text in texts:
        context, last = text.rsplit(" ", 1)
        target = tok.encode(" " + last).ids
        ids = tok.encode(context).ids + target
        out.append(Example(tuple(ids[-max_len:]), min(len(target), max_len - 1)))
    return out


def encode_flagscale(tok, texts: list[str], max_len: int, cls: int, eod: int) -> list[Example]:
    """FlagScale's framing: [CLS] + text + </s>, the text cut to max_len characters and the
    tokens to max_len (FlagScale keeps max_len + 1 and feeds the first max_len: the same for
    any text shorter than max_len tokens, as every LAMBADA text is)."""
    out = []
    for text in texts:
        text = text[:max_len]
        ids = [cls, *tok.encode(text).ids, eod][:max_len]
        last = len(tok.encode(" " + text.rsplit(" ", 1)[-1]).ids)
        tail = 1 if ids[-1] == eod else 0
        out.append(Example(tuple(ids), min(last, len(ids) - 1 - tail), tail))
    return out


def batches(examples: list[Example], size: int) -> list[list[Example]]:
    """Batches of similar lengths (sorted), so little of each is padding."""
    ordered = sorted(examples, key=lambda e: len(e.ids))
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def collate(batch: list[Example], pad_id: int, length: int = 0) -> dict[str, torch.Tensor]:
    """``input_ids`` right-padded to ``length`` (0: the batch's longest) and
    ``attention_mask``; ``last_word`` marks the positions whose next token is a last-word
    token."""
    t = max(length, *(len(e.ids) for e in batch))
    input_ids = torch.full((len(batch), t), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(batch), t), dtype=torch.long)
    last_word = torch.zeros((len(batch), t), dtype=torch.bool)
    for i, e in enumerate(batch):
        n = len(e.ids)
        input_ids[i, :n] = torch.tensor(e.ids)
        attention_mask[i, :n] = 1
        end = n - 1 - e.tail
        last_word[i, end - e.last_word_tokens : end] = True
    return {"input_ids": input_ids, "attention_mask": attention_mask, "last_word": last_word}
