"""Stage the llm-serving data directory: the model the server loads.

    python cases/llm-serving/prepare.py --out DATA_DIR --synthetic
    python cases/llm-serving/prepare.py --out DATA_DIR --from DIR

Both write ``DATA_DIR/model/``, a Hugging Face model folder as vLLM loads it: config.json,
safetensors weights, tokenizer.json and tokenizer_config.json.

--synthetic: offline and seeded. A word-level tokenizer over a fixed list of words (one token
a word, so a prompt of n ids is n tokens) and a tiny Llama-shaped decoder with random weights
(2 layers, hidden 128, 4 heads), saved with ``save_pretrained``: it serves garbage quickly,
which is all a serving benchmark of the engine and the host needs.

--from DIR: an operator's model folder (config.json, tokenizer.json, its safetensors files),
linked; the first missing file is named in one line, exit code 2, nothing staged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import harness
from harness.tiny import STORY_WORDS, check_llama_config, save_word_llama

MODEL = "model"


def synthetic(out: Path, args: argparse.Namespace) -> None:
    save_word_llama(out / MODEL, STORY_WORDS, args.seed)


def stage(src: Path, out: Path) -> None:
    check_llama_config(src / "config.json")
    weights = sorted(src.glob("*.safetensors"))
    for needed in (src / "tokenizer.json", *(weights or [src / "model.safetensors"])):
        if not needed.is_file():
            raise harness.InputError(f"{needed}: missing")
    extra = [p for p in src.glob("*.json") if p.is_file()]
    for f in {*weights, *extra}:
        harness.link_or_copy(f, out / MODEL / f.name)


if __name__ == "__main__":
    sys.exit(
        harness.prepare_main(
            __file__,
            __doc__,
            synthetic,
            stage=stage,
            real_data="a Hugging Face model folder (config.json, tokenizer.json, *.safetensors)",
        )
    )
