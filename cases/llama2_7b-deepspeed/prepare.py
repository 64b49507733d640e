"""Stage the llama2_7b-deepspeed data directory.

    python cases/llama2_7b-deepspeed/prepare.py --synthetic --out DATA_DIR
    python cases/llama2_7b-deepspeed/prepare.py --from SRC_DIR --out DATA_DIR

The layout (both modes):

    DATA_DIR/llama2_7b_hf/config.json        the model's shape (LlamaConfig); the case
                                             initialises the weights at random, as the seed
    DATA_DIR/openwebtext_llama2_100M.npy     a flat array of token ids (preprocess.py)

--synthetic writes, offline and seeded, templated web-like documents as raw text, trains a
tiny tokenizer on them (saved next to a tiny LlamaConfig with save_pretrained, the shape
of the finetune case's tiny Llama: tiny_llama.py there), and runs the preprocessing
(preprocess.py) from that raw text to the .npy. --from checks SRC_DIR (the same layout:
Llama-2-7B's config.json, the array preprocess.py made from openwebtext) and copies it in;
the first missing or malformed file is named and the exit code is 2.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

import preprocess
from harness import InputError
from openwebtext import MODEL_DIR, TOKENS, load_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llama2_7b_finetune-pytorch"))
import tiny_llama  # noqa: E402 - the shared tiny Llama lives with the finetune case

SUBJECTS = [
    "the city council",
    "a local team",
    "the new museum",
    "our neighbours",
    "the old bridge",
]
VERBS = ["opened", "repaired", "visited", "announced", "celebrated", "closed"]
OBJECTS = ["a park", "the station", "a library", "the market", "a school", "the harbour"]
TIMES = ["on Monday", "last week", "this morning", "in spring", "after the storm"]


def document(rng: random.Random) -> str:
    sentences = [
        f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
        f"{rng.choice(TIMES)}."
        for _ in range(rng.randint(3, 8))
    ]
    return " ".join(sentences)


def synthetic(out: Path, seed: int, n_docs: int) -> None:
    import transformers
    from transformers import LlamaConfig

    transformers.utils.logging.disable_progress_bar()
    rng = random.Random(seed)
    docs = [document(rng) for _ in range(n_docs)]
    model_dir = out / MODEL_DIR
    tokenizer = tiny_llama.train_tokenizer(docs, model_dir, vocab_size=256)
    config: LlamaConfig = tiny_llama.tiny_config(len(tokenizer))
    config.save_pretrained(model_dir)
    with tempfile.TemporaryDirectory() as raw:  # the raw text, as openwebtext ships it
        for i, doc in enumerate(docs):
            (Path(raw) / f"doc{i:06d}.txt").write_text(doc, encoding="utf-8")
        argv = ["--tokenizer", str(model_dir), "--text-dir", raw, "--out", str(out / TOKENS)]
        preprocess.main(argv)


def check(src: Path) -> None:
    """The layout of a data directory; InputError names the first bad file."""
    if not src.is_dir():
        raise InputError(f"not a directory: {src}")
    config = src / MODEL_DIR / "config.json"
    try:
        shape = json.loads(config.read_text(encoding="utf-8"))
        model_type, vocab = shape.get("model_type"), int(shape["vocab_size"])
    except FileNotFoundError:
        raise InputError(f"missing data: {config}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError(f"{config}: not a Llama config: {e}") from None
    if model_type != "llama":
        raise InputError(f"{config}: model_type is {model_type!r}, expected 'llama'")
    load_tokens(src / TOKENS, vocab)


def stage(src: Path, out: Path) -> None:
    shutil.copytree(src / MODEL_DIR, out / MODEL_DIR, dirs_exist_ok=True)
    shutil.copy2(src / TOKENS, out / TOKENS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the case's data directory")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--synthetic", action="store_true", help="tiny offline shape and data")
    mode.add_argument("--from", dest="src", type=Path, help="stage a real data directory")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--docs", type=int, default=2000)
    args = parser.parse_args(argv)
    try:
        if args.synthetic:
            args.out.mkdir(parents=True, exist_ok=True)
            synthetic(args.out, args.seed, args.docs)
            print(f"wrote synthetic llama2_7b-deepspeed data to {args.out}")
            return 0
        if args.src is None:
            raise InputError(
                f"pass --synthetic, or --from DIR holding {MODEL_DIR}/config.json (Llama-2-7B) "
                f"and {TOKENS} (preprocess.py from openwebtext), to stage into {args.out}"
            )
        check(args.src)
        args.out.mkdir(parents=True, exist_ok=True)
        stage(args.src, args.out)
        print(f"staged {args.src} into {args.out}")
        return 0
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
