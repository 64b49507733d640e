"""Stage the llama2_7b-deepspeed data directory.

    python cases/llama2_7b-deepspeed/prepare.py --synthetic --out DATA_DIR
    python cases/llama2_7b-deepspeed/prepare.py --from SRC_DIR --out DATA_DIR

The layout (both modes):

    DATA_DIR/llama2_7b_hf/config.json        the model's shape (LlamaConfig); the case
                                             initialises the weights at random, as the seed
    DATA_DIR/openwebtext_llama2_100M.npy     a flat array of token ids (preprocess.py)

--synthetic writes, offline and seeded, templated web-like documents as raw text, trains a
tiny tokenizer on them (saved next to a tiny LlamaConfig with save_pretrained: harness.tiny,
the shape the finetune case's synthetic Llama has too), and runs the preprocessing
(preprocess.py) from that raw text to the .npy. --from checks SRC_DIR (the same layout:
Llama-2-7B's config.json, the array preprocess.py made from openwebtext) and links it in,
with fc_autotune_fp16.log where SRC_DIR has one (Kunlunxin's FC tiling table: the R300
row's XPU_FC_AUTOTUNE_FILE, configs/kunlunxin/R300x1x8.yaml); the first missing or
malformed file is named and the exit code is 2.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

import harness
import preprocess
from harness.tiny import check_llama_config, tiny_llama_config, train_bpe_tokenizer
from openwebtext import FC_AUTOTUNE, MODEL_DIR, TOKENS, load_tokens

REAL_DATA = f"{MODEL_DIR}/config.json (Llama-2-7B) and {TOKENS} (preprocess.py from openwebtext)"

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


def synthetic(out: Path, args: argparse.Namespace) -> None:
    import transformers

    transformers.utils.logging.disable_progress_bar()
    rng = random.Random(args.seed)
    docs = [document(rng) for _ in range(args.docs)]
    model_dir = out / MODEL_DIR
    tokenizer = train_bpe_tokenizer(docs, model_dir, vocab_size=256)
    tiny_llama_config(len(tokenizer)).save_pretrained(model_dir)
    with tempfile.TemporaryDirectory() as raw:  # the raw text, as openwebtext ships it
        for i, doc in enumerate(docs):
            (Path(raw) / f"doc{i:06d}.txt").write_text(doc, encoding="utf-8")
        argv = ["--tokenizer", str(model_dir), "--text-dir", raw, "--out", str(out / TOKENS)]
        preprocess.main(argv)


def stage(src: Path, out: Path) -> None:
    """Check the model's config and the token array (InputError names the first bad file),
    then link both in, and Kunlunxin's FC autotune table where SRC_DIR has one."""
    config = check_llama_config(src / MODEL_DIR / "config.json")
    load_tokens(src / TOKENS, int(config["vocab_size"]))
    files = [p for p in sorted((src / MODEL_DIR).iterdir()) if p.is_file()]
    for f in files:
        harness.link_or_copy(f, out / MODEL_DIR / f.name)
    harness.link_or_copy(src / TOKENS, out / TOKENS)
    if (src / FC_AUTOTUNE).is_file():
        harness.link_or_copy(src / FC_AUTOTUNE, out / FC_AUTOTUNE)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=int, default=2000, help="synthetic documents")


if __name__ == "__main__":
    sys.exit(
        harness.prepare_main(
            __file__, __doc__, synthetic, stage=stage, options=options, real_data=REAL_DATA
        )
    )
