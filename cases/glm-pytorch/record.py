"""SuperGLUE ReCoRD as GLM's multi-token cloze: reading the official jsonl, encoding, scoring.

ReCoRD (``ReCoRD/train.jsonl``, ``val.jsonl``), one passage per line::

    {"idx": 0, "source": "...",
     "passage": {"text": "...@highlight\\n...", "entities": [{"start": 0, "end": 4}, ...]},
     "qas": [{"idx": 0, "query": "... @placeholder ...",
              "answers": [{"start": 0, "end": 4, "text": "Alice"}]}]}

Entity and answer ``end`` offsets are inclusive. Each query is one question; its candidates
are the passage's distinct entity strings, sorted and punctuation-standardised as FlagPerf's
data script did (``glm_data`` makes its training examples from these). As in GLM's ReCoRD
setup, a candidate is scored by the log-likelihood of its tokens filling the [MASK] that
replaces ``@placeholder``:

    part A  [CLS] passage query-with-[MASK]         positions 0..n-1, block positions 0
    part B  <|startofpiece|> answer                 positions = the [MASK]'s, block 1..k+1
    targets answer <|endofpiece|>, at the part B positions

and training minimises the cross-entropy over the candidates' scores. The metric is ReCoRD's
exact match: the chosen candidate, normalised (lower case, no punctuation or articles), equals
a normalised gold answer.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from glm_model import blank_infilling
from harness.errors import InputError
from harness.jsonl import json_lines
from harness.tiny import WORDPIECE_SPECIAL

PLACEHOLDER = "@placeholder"
STANDARD_PUNCTUATION = str.maketrans(
    {"\u201c": '"', "\u201d": '"', "\u2019": "'", "\u2018": "'", "\u2013": "-"}
)


@dataclass(frozen=True)
class Question:
    passage: str
    query: str
    candidates: tuple[str, ...]
    answers: tuple[str, ...]

    @property
    def label(self) -> int:
        """Index of the first candidate that is a gold answer; -1 if none is."""
        gold = set(self.answers)
        return next((i for i, c in enumerate(self.candidates) if c in gold), -1)


def _field(obj: Any, key: str, kind: type, where: str) -> Any:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind):
        raise InputError(f"{where}: field {key!r} missing or not a {kind.__name__}")
    return value


def standardize(text: str) -> str:
    """GLM's ``punctuation_standardization``: curly quotes and the en dash made ASCII, one
    character for one (entity offsets still hold)."""
    return text.translate(STANDARD_PUNCTUATION)


def read_record(path: Path) -> list[Question]:
    """All questions of a ReCoRD jsonl file as FlagPerf's evaluation examples (``glm_data``):
    punctuation standardised, the candidates the passage's entities as a sorted set, the
    answers a sorted set; InputError naming file:line and field."""
    questions = []
    for where, row in json_lines(path):
        passage = _field(row, "passage", dict, where)
        text = standardize(_field(passage, "text", str, where + " passage"))
        entities = set()
        for ent in _field(passage, "entities", list, where + " passage"):
            start = _field(ent, "start", int, where + " passage.entities")
            end = _field(ent, "end", int, where + " passage.entities")
            entities.add(text[start : end + 1])
        candidates = tuple(sorted(entities))
        clean = text.replace("@highlight\n", "- ")  # GLM's passage clean-up
        for qa in _field(row, "qas", list, where):
            query = standardize(_field(qa, "query", str, where + " qas"))
            if PLACEHOLDER not in query:
                raise InputError(f"{where}: qas.query has no {PLACEHOLDER}")
            answers = qa.get("answers") or []  # the test split has none
            gold = {standardize(_field(a, "text", str, where + " qas.answers")) for a in answers}
            questions.append(Question(clean, query, candidates, tuple(sorted(gold))))
    if not questions:
        raise InputError(f"{path}: no questions")
    return questions


def normalize_answer(text: str) -> str:
    """SQuAD/ReCoRD normalisation: lower case, no punctuation, articles or extra spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def exact_match(prediction: str, answers: tuple[str, ...]) -> bool:
    return any(normalize_answer(prediction) == normalize_answer(a) for a in answers)


class WordPiece:
    """BERT's WordPiece vocabulary (vocab.txt) plus GLM's two block tokens after it."""

    def __init__(self, vocab_file: Path) -> None:
        from tokenizers import BertWordPieceTokenizer

        words = vocab_file.read_text(encoding="utf-8").splitlines()
        missing = [t for t in WORDPIECE_SPECIAL if t not in words]
        if missing:
            raise InputError(f"{vocab_file}: not a BERT vocabulary (no {missing[0]} line)")
        self.tokenizer = BertWordPieceTokenizer(str(vocab_file), lowercase=True)
        ids = {w: i for i, w in enumerate(words)}
        self.pad, self.cls, self.mask = ids["[PAD]"], ids["[CLS]"], ids["[MASK]"]
        # GLM's BertWordPieceTokenizer appends <|startofpiece|>, <|endofpiece|>
        self.sop, self.eop = len(words), len(words) + 1
        self.size = len(words) + 2

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids


@dataclass(frozen=True)
class EncodedQuestion:
    context: tuple[int, ...]  # part A
    mask_position: int
    choices: tuple[tuple[int, ...], ...]  # answer tokens per candidate
    label: int  # -1: no candidate is a gold answer
    candidates: tuple[str, ...]
    answers: tuple[str, ...]


def encode_question(
    tok: WordPiece, q: Question, max_len: int, max_answer_tokens: int = 16
) -> EncodedQuestion:
    """Part A and the candidates' tokens; the passage is cut so the longest candidate fits."""
    candidates = q.candidates or ("",)  # no entity: one empty candidate, never a match
    choices = tuple(tuple(tok.encode(c)[:max_answer_tokens]) or (tok.pad,) for c in candidates)
    before, _, after = q.query.partition(PLACEHOLDER)
    query = tok.encode(before) + [tok.mask] + tok.encode(after)
    longest = max((len(c) for c in choices), default=1)
    query = query[: max(1, max_len // 2)]
    if tok.mask not in query:  # a very long query: keep the blank at its end
        query[-1] = tok.mask
    room = max(0, max_len - 2 - len(query) - longest)  # 2: [CLS] and part B's [E]/[S]
    context = (tok.cls, *tok.encode(q.passage)[:room], *query)
    return EncodedQuestion(
        context=context,
        mask_position=context.index(tok.mask, len(context) - len(query)),
        choices=choices,
        label=q.label,
        candidates=candidates,
        answers=q.answers,
    )


def collate(batch: list[EncodedQuestion], max_len: int, tok: WordPiece) -> dict[str, Any]:
    """One sequence per (question, candidate), padded to max_len: the passage with the
    candidate in the blank, the candidate as the one infilled span (``blank_infilling``).

    As FlagPerf's ``my_collate`` (glm dataloaders/dataloader.py at e5edef37), every question
    gets as many sequences as the batch's most candidates: the missing ones repeat its first
    candidate and are computed but never scored (``real_choice`` False). ``real_tokens``
    counts the real candidates' tokens only."""
    width = max(len(q.choices) for q in batch)
    rows = [(qi, ci) for qi in range(len(batch)) for ci in range(width)]
    n = len(rows)
    input_ids = torch.full((n, max_len), tok.pad, dtype=torch.long)
    position_ids = torch.zeros((n, 2, max_len), dtype=torch.long)
    targets = torch.zeros((n, max_len), dtype=torch.long)
    target_mask = torch.zeros((n, max_len), dtype=torch.bool)
    sep = torch.zeros(n, dtype=torch.long)
    real_tokens = 0
    real = torch.tensor([ci < len(batch[qi].choices) for qi, ci in rows])
    for r, (qi, ci) in enumerate(rows):
        q = batch[qi]
        answer = q.choices[ci] if real[r] else q.choices[0]
        m = q.mask_position
        filled = (*q.context[:m], *answer, *q.context[m + 1 :])
        s = blank_infilling(filled, [(m, m + len(answer))], tok.mask, tok.sop, tok.eop)
        t = len(s["input_ids"])
        input_ids[r, :t] = torch.tensor(s["input_ids"])
        position_ids[r, 0, :t] = torch.tensor(s["position_ids"])
        position_ids[r, 1, :t] = torch.tensor(s["block_position_ids"])
        targets[r, :t] = torch.tensor(s["targets"])
        target_mask[r, :t] = torch.tensor(s["loss_mask"], dtype=torch.bool)
        sep[r] = s["sep"]
        real_tokens += t if real[r] else 0
    return {
        "input_ids": input_ids,
        "position_ids": position_ids,
        "sep": sep,
        "targets": targets,
        "target_mask": target_mask,
        "choice_index": torch.tensor(rows, dtype=torch.long).view(n, 2),
        "real_choice": real,
        "labels": torch.tensor([q.label for q in batch]),
        "real_tokens": real_tokens,
        "questions": batch,
    }
