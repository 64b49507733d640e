"""FlagPerf's GLM examples (seed 000) from SuperGLUE ReCoRD, and its training loader.

FlagPerf's GLM reads ReCoRD/glm_train_eval_hdf5_sparse/{train,eval}_hdf5/*.hdf5 (_base.py
``train_data``, ``eval_data``), the files Iluvatar's public ``create_train_eval_data.py``
writes (Deep-Spark/DeepSparkHub de755f9c, nlp/cloze_test/glm/pytorch/GLMForMultiTokenCloze/
base/data_preprocessing/, with its dataset.py ``RecordProcessor._create_examples``):

- passage, entities, query and answers punctuation-standardised, entities and answers sorted
  sets (``record.read_record`` reads them so);
- training: one example per gold answer, that answer first, then the entities that are no
  gold answer: at most 9 (``max_train_candidates_per_question`` 10), when there are more
  shuffled by one ``random.Random(42)`` running through the file and cut to 9;
- evaluation: one example per question, every entity a candidate;
- each list sorted, stably, by its examples' number of candidates (``RecordDateset``).

FlagPerf's ``my_collate`` gives every training example label 0: the gold answer is first.
``prepare.py`` writes the two lists as TRAIN and EVAL, one example a line::

    {"passage": "...", "query": "... @placeholder ...", "candidates": [...], "answers": [...]}
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.jsonl import json_lines
from record import PLACEHOLDER, Question

TRAIN, EVAL = "ReCoRD/glm_train_eval/train.jsonl", "ReCoRD/glm_train_eval/eval.jsonl"
MAX_TRAIN_CANDIDATES = 10  # the dataset.py's max_train_candidates_per_question
SHUFFLE_SEED = 42  # its entity_shuffler
SAMPLER_SEED = 0  # FlagPerf's DistributedSampler: torch's default seed


def train_examples(questions: Sequence[Question]) -> list[Question]:
    """FlagPerf's training examples of ``questions`` (in file order), sorted as its hdf5."""
    shuffler, examples = random.Random(SHUFFLE_SEED), []
    for q in questions:
        for answer in q.answers:
            negatives = [c for c in q.candidates if c not in q.answers]
            if len(negatives) > MAX_TRAIN_CANDIDATES - 1:
                shuffler.shuffle(negatives)
                negatives = negatives[: MAX_TRAIN_CANDIDATES - 1]
            examples.append(Question(q.passage, q.query, (answer, *negatives), (answer,)))
    return by_candidates(examples)


def by_candidates(examples: Sequence[Question]) -> list[Question]:
    return sorted(examples, key=lambda q: len(q.candidates))


def write_examples(path: Path, examples: Sequence[Question]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for q in examples:
            row = {"passage": q.passage, "query": q.query}
            row |= {"candidates": list(q.candidates), "answers": list(q.answers)}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _strings(row: Any, key: str, where: str) -> tuple[str, ...]:
    value = row.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: field {key!r} missing or not a list of strings")
    return tuple(value)


def read_examples(path: Path, train: bool) -> list[Question]:
    """A prepared file's examples; InputError naming file:line and field, and for training
    one whose gold answer is not first or that has more than MAX_TRAIN_CANDIDATES."""
    examples = []
    for where, row in json_lines(path):
        if not isinstance(row, dict):
            raise InputError(f"{where}: not a JSON object")
        passage, query = row.get("passage"), row.get("query")
        if not isinstance(passage, str) or not isinstance(query, str) or PLACEHOLDER not in query:
            raise InputError(f"{where}: fields 'passage' and 'query' (with {PLACEHOLDER}) needed")
        candidates, answers = _strings(row, "candidates", where), _strings(row, "answers", where)
        if not candidates:
            raise InputError(f"{where}: field 'candidates' is empty")
        if train and (candidates[0] not in answers or len(candidates) > MAX_TRAIN_CANDIDATES):
            raise InputError(
                f"{where}: field 'candidates' is not FlagPerf's training example (its gold "
                f"answer first, at most {MAX_TRAIN_CANDIDATES}); prepare the data again"
            )
        examples.append(Question(passage, query, candidates, answers))
    if not examples:
        raise InputError(f"{path}: no examples")
    return examples


def train_loader(
    run: Any, rows: Sequence[Any], batch_size: int, collate: Callable | None, source: str
) -> Any:
    """FlagPerf's GLM loader (dataloaders/dataloader.py ``build_train_dataloader``): a
    ``DistributedSampler`` with its default seed 0 (not hp ``seed``) and without drop_last
    (the replicas' shares padded to equal length by repeating rows), told the epoch (its
    trainer's ``set_epoch``), and the last partial batch of each epoch kept."""
    from torch.utils.data import DistributedSampler

    sampler = DistributedSampler(
        rows, num_replicas=run.layout.dp, rank=run.layout.dp_rank, seed=SAMPLER_SEED
    )
    return run.train_loader(
        rows, batch_size, collate, source=source, sampler=sampler, drop_last=False
    )
