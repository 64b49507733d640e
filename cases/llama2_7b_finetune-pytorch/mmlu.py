"""MMLU k-shot accuracy as Hendrycks et al.'s test.py (hendrycks/test) and FlagPerf score it.

Layout (MMLU's data.tar): ``dev/<subject>_dev.csv`` holds the shots, ``test/<subject>_test.csv``
the questions; no header, one question per row: question, four choices, answer letter.

The prompt is "The following are multiple choice questions (with answers) about  <subject>."
(two spaces: test.py's format_subject puts one before each word), then k answered dev
questions, then the test question ending in "Answer:". A prompt whose tokens and BOS exceed
hp max_seq_length (FlagPerf's ``seq_length``, 512) is cut as FlagPerf's dataloader_mmlu.py
cuts it: its blank-line-separated pieces lose the second one (the first shot left) until it
fits. Two rules pick the answer from the next-token logits (``SCORING``):

- ``vocab``: FlagPerf's (evaluate/evaluator.py): the argmax over the whole vocabulary is
  right only when it is the token of the answer letter ("▁A" after "Answer:");
- ``letters``: Hendrycks': whichever of the tokens of "A", "B", "C", "D" scores highest.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from harness import InputError

# Where the data directory holds MMLU's dev/ and test/: FlagPerf's mmlu_dir (config_A100x1x1.py).
DIR = "mmlu_dataset"
LETTERS = ("A", "B", "C", "D")
# The answer rules (hp mmlu_scoring, its choices in case.yaml), as the record's note describes
# them.
SCORING = {
    "vocab": "right when the argmax over the whole vocabulary is the answer letter's token "
    "(FlagPerf's rule)",
    "letters": "the highest next-token logit among A/B/C/D (Hendrycks' rule)",
}
# The model's mode while scoring (hp mmlu_mode, its choices in case.yaml), as the record's
# note describes them.
MODES = {
    "train": "scored in training mode, as FlagPerf's run_pretraining.py (95df9aac): "
    "model.train() at each epoch's start, model.eval() only in evaluation(), which "
    "run_validation=False skips, so LoRA dropout 0.05 was active while scoring",
    "eval": "scored in eval mode (LoRA dropout off): fleetperf's own correction, not "
    "FlagPerf's (the seed's MMLU ran in training mode)",
}


@dataclass(frozen=True)
class Question:
    text: str
    choices: tuple[str, str, str, str]
    answer: int  # index into LETTERS


@dataclass(frozen=True)
class Item:
    subject: str
    input_ids: list[int]
    answer: int
    cut: int  # pieces dropped to fit (shots first; FlagPerf's cut)


def read_questions(path: Path) -> list[Question]:
    """One MMLU CSV file; InputError naming the file and row when it is malformed."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
    except FileNotFoundError:
        raise InputError(f"missing data: {path}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{path}: not a readable CSV file: {e}") from None
    out = []
    for n, row in enumerate(rows, 1):
        if len(row) != 6 or row[5].strip() not in LETTERS:
            raise InputError(f"{path}: row {n}: expected question, 4 choices, answer A-D")
        out.append(Question(row[0], (row[1], row[2], row[3], row[4]), LETTERS.index(row[5])))
    if not out:
        raise InputError(f"{path}: no questions")
    return out


def subjects(root: Path) -> list[str]:
    """The subjects of ``root``/test, each checked to have its dev file (the shots)."""
    found = sorted(p.name[: -len("_test.csv")] for p in (root / "test").glob("*_test.csv"))
    if not found:
        raise InputError(f"missing data: {root / 'test'}/<subject>_test.csv (MMLU layout)")
    for subject in found:
        dev = root / "dev" / f"{subject}_dev.csv"
        if not dev.is_file():
            raise InputError(f"missing data: {dev} (the shots for {subject})")
    return found


def select(root: Path, wanted: str) -> list[str]:
    """The subjects ``wanted`` ("all" or comma-separated names) of ``root``: InputError naming
    the hp field before anything is trained."""
    names = subjects(root)
    if wanted == "all":
        return names
    unknown = sorted(set(wanted.split(",")) - set(names))
    if unknown:
        raise InputError(f"{root / 'test'}: no subject {unknown[0]!r} (hp.mmlu_subjects)")
    return wanted.split(",")


def format_example(q: Question, with_answer: bool) -> str:
    text = q.text + "".join(f"\n{x}. {c}" for x, c in zip(LETTERS, q.choices, strict=True))
    return text + (f"\nAnswer: {LETTERS[q.answer]}\n\n" if with_answer else "\nAnswer:")


def prompt(subject: str, shots: list[Question], q: Question) -> str:
    header = (
        "The following are multiple choice questions (with answers) about "
        f"{''.join(' ' + word for word in subject.split('_'))}.\n\n"
    )
    return header + "".join(format_example(s, True) for s in shots) + format_example(q, False)


def letter_ids(tokenizer: Any) -> list[int]:
    """The token of each answer letter as it follows "Answer:" (Llama: "▁A")."""
    ids = [tokenizer(x)["input_ids"][-1] for x in LETTERS]
    if len(set(ids)) != len(LETTERS):
        raise InputError("tokenizer maps the answer letters A-D to fewer than 4 tokens")
    return ids


def fit(tokenizer: Any, text: str, max_len: int) -> tuple[str, int]:
    """``text`` cut as FlagPerf's dataloader_mmlu.py cuts it: while its tokens plus BOS exceed
    ``max_len``, split it at blank lines and drop the second piece (the first shot left,
    then the question's own pieces); returns the text and the pieces dropped."""
    cut = 0
    while len(tokenizer.tokenize(text)) + 1 > max_len:
        pieces = text.split("\n\n")  # split again each time, as FlagPerf's loop does
        if len(pieces) < 2:
            raise ValueError(f"the subject line alone exceeds {max_len} tokens")
        pieces.pop(1)
        text = "\n\n".join(pieces)
        cut += 1
    return text, cut


def build_items(root: Path, names: list[str], tokenizer: Any, k: int, max_len: int) -> list[Item]:
    """Tokenized k-shot prompts for every test question of the subjects ``names``, each cut
    to ``max_len`` tokens (``fit``)."""
    items = []
    for subject in names:
        dev = read_questions(root / "dev" / f"{subject}_dev.csv")
        if len(dev) < k:
            raise InputError(f"{root / 'dev' / f'{subject}_dev.csv'}: fewer than {k} shots")
        for q in read_questions(root / "test" / f"{subject}_test.csv"):
            try:
                text, cut = fit(tokenizer, prompt(subject, dev[:k], q), max_len)
            except ValueError as e:
                raise InputError(f"{root / 'test' / f'{subject}_test.csv'}: {e}") from None
            items.append(Item(subject, tokenizer(text)["input_ids"], q.answer, cut))
    return items


@torch.no_grad()
def score(
    logits_of: Callable[[torch.Tensor], torch.Tensor],
    items: list[Item],
    letters: list[int],
    scoring: str,
) -> dict[str, dict[str, float]]:
    """Per subject {correct, total, acc} under ``scoring`` (one of SCORING); ``logits_of``
    maps [1, T] ids to [1, T, V] logits."""
    per: dict[str, dict[str, float]] = {}
    for item in items:
        logits = logits_of(torch.tensor([item.input_ids]))[0, -1]
        if scoring == "vocab":
            picked = int(logits.argmax())
        else:
            picked = letters[int(logits[letters].argmax())]
        s = per.setdefault(item.subject, {"correct": 0, "total": 0})
        s["correct"] += int(picked == letters[item.answer])
        s["total"] += 1
    for s in per.values():
        s["acc"] = s["correct"] / s["total"]
    return per


def overall(per_subject: dict[str, dict[str, float]]) -> float:
    """Accuracy over all questions (MMLU's "weighted" average)."""
    correct = sum(s["correct"] for s in per_subject.values())
    return correct / sum(s["total"] for s in per_subject.values())


@torch.no_grad()
def score_model(
    model: Any, device: Any, items: list[Item], letters: list[int], scoring: str, mode: str
) -> dict[str, dict[str, float]]:
    """Per-subject results of ``model`` (``score``) in ``mode`` (``MODES``), no autocast as
    FlagPerf's (a float16 model scores in float16); the model is left in training mode."""
    model.train(mode == "train")
    try:
        logits_of = lambda ids: model(input_ids=ids.to(device), logits_to_keep=1).logits  # noqa: E731
        return score(logits_of, items, letters, scoring)
    finally:
        model.train()
