"""Stage the glm-pytorch data directory.

    python cases/glm-pytorch/prepare.py --out DATA_DIR --synthetic
    python cases/glm-pytorch/prepare.py --out DATA_DIR --from DIR

Both write the layout run.py reads:

    DATA_DIR/checkpoint/mp_rank_00_model_states.pt   GLM state dict, DeepSpeed layout
                                                      ({"module": state dict, ...})
    DATA_DIR/checkpoint/vocab.txt                     BERT WordPiece vocabulary
    DATA_DIR/ReCoRD/train.jsonl, val.jsonl            SuperGLUE ReCoRD, official jsonl
    DATA_DIR/ReCoRD/glm_train_eval/train.jsonl        FlagPerf's examples made from them
    DATA_DIR/ReCoRD/glm_train_eval/eval.jsonl         (glm_data.py: what its hdf5 holds)

--synthetic: offline and seeded, a tiny GLM (hidden 64, 2 layers, 128 positions) with random
weights, a small vocabulary, and a learnable ReCoRD-format cloze set: each passage states
who did what ("kalo painted the bridge ."); every verb has its own group of names, so the
query's role word tells which candidate fills "@placeholder was the painter of the bridge .".

Both make FlagPerf's training examples (``glm_data``: one per gold answer, it first, at most
9 other entities) and evaluation examples (one per question, every entity).

--from DIR: an operator's real files, checked and then hard-linked (copied across
filesystems): the released GLM-Large checkpoint (``blocklm-large-blank``: the first
``mp_rank_00_model_states.pt`` found in DIR or up to two folders below), ``vocab.txt``
(bert-large-uncased, in DIR or beside the checkpoint), and ``ReCoRD/train.jsonl``,
``ReCoRD/val.jsonl`` (SuperGLUE's ReCoRD.zip unpacked in DIR). The first missing or malformed
file is named in one line on stderr, exit code 2, nothing staged.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import glm_data
import harness
from harness.tiny import wordpiece_vocabulary
from record import Question, WordPiece, read_record

CHECKPOINT = "mp_rank_00_model_states.pt"
REAL_DATA = f"GLM-Large's {CHECKPOINT}, vocab.txt, ReCoRD/train.jsonl, ReCoRD/val.jsonl"
# verb in the passage -> role word in the query (a role word appears in queries only)
ROLES = {
    "painted": "painter",
    "visited": "visitor",
    "built": "builder",
    "won": "winner",
    "sold": "seller",
    "found": "finder",
    "sang": "singer",
    "cleaned": "cleaner",
}
VERBS = tuple(ROLES)
NAMES_PER_VERB = 6
SYLLABLES = ("ka", "lo", "mi", "ra", "ne", "tu", "so", "vi", "de", "po", "zu", "fe")
OBJECTS = ("bridge", "house", "prize", "boat", "song", "garden", "tower", "map", "car", "lamp")
FILLER = ("the", "a", "on", "in", "monday", "city", "old", "new", "after", "it", "was", "and")


# ----------------------------------------------------------------------------- synthetic
def names() -> dict[str, list[str]]:
    """Distinct two-syllable names, NAMES_PER_VERB for each verb."""
    rng = random.Random(7)
    pool = sorted({a + b for a in SYLLABLES for b in SYLLABLES})
    rng.shuffle(pool)
    return {v: pool[i * NAMES_PER_VERB : (i + 1) * NAMES_PER_VERB] for i, v in enumerate(VERBS)}


def passage_row(rng: random.Random, idx: int, groups: dict[str, list[str]]) -> dict:
    verbs = rng.sample(VERBS, rng.randint(2, 3))
    facts = [(rng.choice(groups[v]), v, rng.choice(OBJECTS)) for v in verbs]
    text, entities = "", []
    for who, verb, what in facts:
        text += f"{rng.choice(FILLER)} "
        entities.append({"start": len(text), "end": len(text) + len(who) - 1})
        text += f"{who} {verb} the {what} .\n@highlight\n"
    qas = []
    for q, (who, verb, what) in enumerate(rng.sample(facts, rng.randint(1, 2))):
        start = text.index(f"{who} {verb}")
        answer = {"start": start, "end": start + len(who) - 1, "text": who}
        query = f"@placeholder was the {ROLES[verb]} of the {what} ."
        qas.append({"idx": q, "query": query, "answers": [answer]})
    return {
        "idx": idx,
        "source": "synthetic",
        "passage": {"text": text, "entities": entities},
        "qas": qas,
    }


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def vocabulary(groups: dict[str, list[str]]) -> list[str]:
    words = {w for g in groups.values() for w in g} | set(VERBS + OBJECTS + FILLER)
    words |= set(ROLES.values()) | {"-", ".", "@", "highlight", "placeholder", "of"}
    return wordpiece_vocabulary(words)


def synthetic(out: Path, args: argparse.Namespace) -> None:
    import torch
    from glm_model import GLMConfig, GLMModel

    seed, rng, groups = args.seed, random.Random(args.seed), names()
    train = [passage_row(rng, i, groups) for i in range(args.train_passages)]
    write_jsonl(out / "ReCoRD" / "train.jsonl", train)
    dev = [passage_row(rng, i, groups) for i in range(args.dev_passages)]
    write_jsonl(out / "ReCoRD" / "val.jsonl", dev)
    write_examples(out, *(read_record(out / "ReCoRD" / n) for n in ("train.jsonl", "val.jsonl")))
    vocab = vocabulary(groups)
    ckpt = out / "checkpoint"
    ckpt.mkdir(parents=True, exist_ok=True)
    (ckpt / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    torch.manual_seed(seed)
    model = GLMModel(GLMConfig(len(vocab) + 2, 64, 2, 4, 128))  # + <|startofpiece|>, <|endofpiece|>
    torch.save({"module": model.state_dict(), "iteration": 0}, ckpt / CHECKPOINT)


# ------------------------------------------------------------------------------ --from
def find_checkpoint(src: Path) -> Path:
    for pattern in (CHECKPOINT, f"*/{CHECKPOINT}", f"*/*/{CHECKPOINT}"):
        found = sorted(src.glob(pattern))
        if found:
            return found[0]
    raise harness.InputError(f"{src}: no {CHECKPOINT} in it or up to two folders below")


def check_checkpoint(path: Path) -> None:
    import torch
    from glm_model import GLMConfig, GLMModel, load_state_dict_file

    try:
        sd = load_state_dict_file(path)
        cfg = GLMConfig.from_state_dict(sd, num_heads=1)
    except (ValueError, KeyError) as e:
        raise harness.InputError(
            str(e) if isinstance(e, ValueError) else f"{path}: missing key {e}"
        ) from None
    with torch.device("meta"):
        expected = GLMModel(cfg).state_dict()
    for key, value in expected.items():
        if key not in sd:
            raise harness.InputError(f"{path}: missing key {key}")
        if tuple(sd[key].shape) != tuple(value.shape):
            raise harness.InputError(
                f"{path}: {key} has shape {tuple(sd[key].shape)}, expected {tuple(value.shape)}"
            )


def write_examples(out: Path, train: list[Question], dev: list[Question]) -> None:
    """FlagPerf's training and evaluation examples of the ReCoRD questions (glm_data)."""
    glm_data.write_examples(out / glm_data.TRAIN, glm_data.train_examples(train))
    glm_data.write_examples(out / glm_data.EVAL, glm_data.by_candidates(dev))


def stage(src: Path, out: Path) -> None:
    ckpt = find_checkpoint(src)
    vocab = next((p for p in (src / "vocab.txt", ckpt.parent / "vocab.txt") if p.is_file()), None)
    if vocab is None:
        raise harness.InputError(f"{src / 'vocab.txt'}: missing (bert-large-uncased vocab.txt)")
    splits = [src / "ReCoRD" / name for name in ("train.jsonl", "val.jsonl")]
    for path in splits:
        if not path.is_file():
            raise harness.InputError(f"{path}: missing (SuperGLUE ReCoRD.zip unpacked in {src})")
    check_checkpoint(ckpt)
    WordPiece(vocab)  # their InputErrors name the file
    train, dev = (read_record(path) for path in splits)
    harness.link_or_copy(ckpt, out / "checkpoint" / CHECKPOINT)
    harness.link_or_copy(vocab, out / "checkpoint" / "vocab.txt")
    for path in splits:
        harness.link_or_copy(path, out / "ReCoRD" / path.name)
    write_examples(out, train, dev)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--train-passages", type=int, default=1500)
    parser.add_argument("--dev-passages", type=int, default=150)


if __name__ == "__main__":
    sys.exit(
        harness.prepare_main(
            __file__, __doc__, synthetic, stage=stage, options=options, real_data=REAL_DATA
        )
    )
