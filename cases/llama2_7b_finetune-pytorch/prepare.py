"""Stage the llama2_7b_finetune-pytorch data directory.

    python cases/llama2_7b_finetune-pytorch/prepare.py --synthetic --out DATA_DIR
    python cases/llama2_7b_finetune-pytorch/prepare.py --from SRC_DIR --out DATA_DIR

The layout (both modes) is FlagPerf's, the directories its config_A100x1x1.py names
(model_name, dataset_dir, mmlu_dir):

    DATA_DIR/llama2_7b_hf/     LlamaForCausalLM in HF layout: config.json, weights
                               (*.safetensors or pytorch_model*.bin), tokenizer files
    DATA_DIR/samsum_dataset/train.json   samsum's corpus.7z unpacked: a JSON array of
                               {"id", "dialogue", "summary"}
    DATA_DIR/mmlu_dataset/dev/<subject>_dev.csv, mmlu_dataset/test/<subject>_test.csv
                               MMLU's data.tar unpacked

--synthetic writes, offline and seeded, a tiny Llama (harness.tiny; save_pretrained) with a
BPE tokenizer trained on the synthetic text, templated dialogues whose summaries follow from
them, and two MMLU-format subjects of templated questions: sums, named abstract_algebra, and
opposites. --from checks SRC_DIR (FlagPerf's data directory for the case, or the same with
fleetperf's earlier names samsum/ and mmlu/) and links it in under FlagPerf's names; the
first missing or malformed file is named and the exit code is 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from functools import partial
from pathlib import Path

import harness
import mmlu
import samsum
from harness import InputError
from harness.tiny import LLAMA_SPECIAL, check_llama_config, tiny_llama_config, train_bpe_tokenizer

CHECKPOINT = "llama2_7b_hf"
# Each directory of the layout, under FlagPerf's name and the earlier one --from accepts.
DIRS = {samsum.DIR: (samsum.DIR, "samsum"), mmlu.DIR: (mmlu.DIR, "mmlu")}
WEIGHTS = ("model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json")
TOKENIZERS = ("tokenizer.json", "tokenizer.model")
REAL_DATA = (
    f"{CHECKPOINT}/ (Llama-2-7B, HF layout), {samsum.TRAIN_JSON} (samsum's corpus.7z "
    f"unpacked) and {mmlu.DIR}/dev, {mmlu.DIR}/test (MMLU's data.tar unpacked)"
)

NAMES = [
    "Anna",
    "Bob",
    "Carla",
    "Dan",
    "Eve",
    "Frank",
    "Gina",
    "Hugo",
    "Iris",
    "Jack",
    "Kate",
    "Liam",
    "Mia",
    "Noah",
    "Olga",
    "Paul",
]
PLACES = [
    "cinema",
    "park",
    "office",
    "gym",
    "library",
    "station",
    "beach",
    "market",
    "museum",
    "cafe",
]
ITEMS = [
    "cake",
    "wine",
    "books",
    "tickets",
    "keys",
    "flowers",
    "snacks",
    "music",
    "charger",
    "umbrella",
]
TIMES = ("tonight", "tomorrow", "at noon", "on Friday", "at six", "next week", "on Sunday")


def dialogue(rng: random.Random) -> dict[str, str]:
    a, b = rng.sample(NAMES, 2)
    place, item, time = rng.choice(PLACES), rng.choice(ITEMS), rng.choice(TIMES)
    yes = rng.random() < 0.5
    lines = [
        f"{a}: are you coming to the {place} {time}?",
        f"{b}: {'yes, I will bring the' if yes else 'no, sorry, I lost the'} {item}.",
        f"{a}: {'great, see you there' if yes else 'oh no, maybe next time'}!",
    ]
    verb = f"will come to the {place} {time} and bring the" if yes else "lost the"
    summary = f"{b} {verb} {item}." if yes else f"{b} {verb} {item} and will not come."
    return {"id": f"{rng.getrandbits(32):08x}", "dialogue": "\n".join(lines), "summary": summary}


def arithmetic(rng: random.Random) -> tuple[str, list[str], int]:
    x, y = rng.randint(1, 20), rng.randint(1, 20)
    right = x + y
    wrong = rng.sample([v for v in range(right - 6, right + 7) if v != right], 3)
    return f"What is {x} plus {y}?", [str(v) for v in wrong], right


def opposites(rng: random.Random) -> tuple[str, list[str], str]:
    pairs = {"hot": "cold", "big": "small", "fast": "slow", "early": "late", "open": "closed"}
    word = rng.choice(sorted(pairs))
    wrong = rng.sample([v for v in pairs.values() if v != pairs[word]], 3)
    return f"What is the opposite of {word}?", wrong, pairs[word]


def mmlu_rows(rng: random.Random, make, n: int) -> list[list[str]]:
    rows = []
    for i in range(n):
        question, wrong, right = make(rng)
        answer = i % 4  # every letter equally often
        choices = [*wrong[:answer], str(right), *wrong[answer:]]
        rows.append([question, *choices, mmlu.LETTERS[answer]])
    return rows


def write_csv(path: Path, rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)


def synthetic(out: Path, args: argparse.Namespace) -> None:
    import torch
    import transformers
    from transformers import LlamaForCausalLM

    transformers.utils.logging.disable_progress_bar()
    rng = random.Random(args.seed)
    records = [dialogue(rng) for _ in range(args.dialogues)]
    (out / samsum.DIR).mkdir(parents=True, exist_ok=True)
    (out / samsum.TRAIN_JSON).write_text(json.dumps(records, indent=1), encoding="utf-8")
    texts = []
    for subject, make in (("abstract_algebra", arithmetic), ("opposites", opposites)):
        dev, test = mmlu_rows(rng, make, 5), mmlu_rows(rng, make, args.questions)
        write_csv(out / mmlu.DIR / "dev" / f"{subject}_dev.csv", dev)
        write_csv(out / mmlu.DIR / "test" / f"{subject}_test.csv", test)
        shots = [mmlu.Question(r[0], tuple(r[1:5]), mmlu.LETTERS.index(r[5])) for r in dev]
        texts += [mmlu.prompt(subject, shots, q) for q in shots]
    texts += [samsum.PROMPT.format(**r, eos=LLAMA_SPECIAL[2]) for r in records]
    ckpt = out / CHECKPOINT
    tokenizer = train_bpe_tokenizer(texts, ckpt)
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(tiny_llama_config(len(tokenizer)))
    model.save_pretrained(ckpt, safe_serialization=True)


def check_checkpoint(ckpt: Path) -> None:
    """InputError naming the first missing or malformed file of an HF Llama checkpoint."""
    check_llama_config(ckpt / "config.json")
    weights = [ckpt / w for w in WEIGHTS if (ckpt / w).is_file()] or sorted(ckpt.glob("*.bin"))
    if not weights:
        raise InputError(f"missing data: {ckpt}/model.safetensors (or an index, or *.bin)")
    if weights[0].name.endswith(".index.json"):
        try:
            shards = set(json.loads(weights[0].read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError, AttributeError) as e:
            raise InputError(f"{weights[0]}: not a weight index: {e}") from None
        for shard in sorted(shards):
            if not (ckpt / shard).is_file():
                raise InputError(f"missing data: {ckpt / shard} (listed in {weights[0].name})")
    if not any((ckpt / t).is_file() for t in TOKENIZERS):
        raise InputError(f"missing data: {ckpt}/tokenizer.model (or tokenizer.json)")


def check(src: Path) -> dict[str, Path]:
    """The whole layout of a data directory; InputError names the first bad file. Returns
    where each of ``DIRS`` is in ``src``."""
    check_checkpoint(src / CHECKPOINT)
    found = {name: harness.find_dir(src, names) for name, names in DIRS.items()}
    samsum.read_records(found[samsum.DIR] / "train.json")
    root = found[mmlu.DIR]
    for subject in mmlu.subjects(root):
        mmlu.read_questions(root / "dev" / f"{subject}_dev.csv")
        mmlu.read_questions(root / "test" / f"{subject}_test.csv")
    return found


def stage(src: Path, out: Path) -> None:
    """Check the whole layout of ``src`` (InputError names the first bad file), then link
    its files into ``out`` under FlagPerf's names (existing ones are replaced)."""
    found = {CHECKPOINT: src / CHECKPOINT, **check(src)}
    for name, where in found.items():
        for f in sorted(p for p in where.rglob("*") if p.is_file()):
            harness.link_or_copy(f, out / name / f.relative_to(where))


def options(parser: argparse.ArgumentParser) -> None:
    # about 20 blocks of 512 tokens: the CPU config's 3 epochs train 60 blocks
    parser.add_argument("--dialogues", type=int, default=240)
    # 24 questions in all: the CPU config's MMLU costs what one subject of 24 did
    parser.add_argument("--questions", type=int, default=12, help="MMLU test rows per subject")


if __name__ == "__main__":
    prepare = partial(harness.prepare_main, stage=stage, options=options, real_data=REAL_DATA)
    sys.exit(prepare(__file__, __doc__, synthetic))
