"""Stage the aquila_33b-inference data directory.

    python cases/aquila_33b-inference/prepare.py --out DATA_DIR --synthetic
    python cases/aquila_33b-inference/prepare.py --out DATA_DIR --from DIR

Both write the layout run.py reads:

    DATA_DIR/checkpoint/        HF layout: config.json, model-0000i-of-0000n.safetensors,
                                model.safetensors.index.json
    DATA_DIR/tokenizer/         vocab.json, merges.txt, special_tokens.txt
    DATA_DIR/data/lambada_test_bak.jsonl

--synthetic: offline and seeded. A byte-level BPE tokenizer trained on generated sentences,
LAMBADA-style texts, and a tiny Llama-family decoder with Aquila's structure (grouped-query
attention, SwiGLU, RMSNorm; hidden 64, 2 layers, 4 heads in 2 groups, random weights) saved as
safetensors shards. The same weights are also written in the seed's Megatron layout, TP 2
(``ckpts/iter_0000001/mp_rank_0X/model_optim_rng.pt``, ``ckpts/latest_checkpointed_iteration.txt``),
so that ``--from DATA_DIR`` exercises the converter.

--from DIR: an operator's files in the seed's layout: ``DIR/tokenizer/`` (the three files),
``DIR/data/lambada_test_bak.jsonl`` (or ``lambada_test.jsonl``), and either an HF checkpoint
``DIR/checkpoint/`` (config.json and its safetensors shards, linked) or the Megatron TP
checkpoint ``DIR/ckpts/`` (converted to HF safetensors by megatron.py, without FlagScale).
The first missing or malformed file is named in one line on stderr, exit code 2; nothing is
staged before everything is checked (``harness.prepare_main``).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

import harness
from harness.tiny import tiny_llama_config

LAMBADA = "lambada_test_bak.jsonl"
SPECIAL_TOKENS = ("<|endoftext|>", "</s>", "<s>", "<|unk|>", "[CLS]")  # FlagScale: cls, eod
WORDS_TEXT = (
    "the a she he they it was were had said looked at into from with and but then "
    "door window house garden river road morning night cold warm old young quiet small "
    "mother father brother sister friend doctor teacher captain stranger dog horse bird "
    "opened closed walked ran smiled whispered waited turned found lost remembered "
    "letter key lamp book bottle coin ring map photograph"
)


# ----------------------------------------------------------------------------- synthetic
def sentence(rng: random.Random, n: int) -> str:
    words = WORDS_TEXT.split()
    return " ".join(rng.choice(words) for _ in range(n))


def synthetic(out: Path, args: argparse.Namespace) -> None:
    import torch
    from megatron import write_megatron
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    rng = random.Random(args.seed)
    texts = [sentence(rng, rng.randint(12, 40)) for _ in range(args.texts)]
    (out / "data").mkdir(parents=True, exist_ok=True)
    with open(out / "data" / LAMBADA, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts)

    tok_dir = out / "tokenizer"
    tok_dir.mkdir(parents=True, exist_ok=True)
    tok = ByteLevelBPETokenizer()  # GPT-2 style, as Aquila's
    tok.train_from_iterator(texts, vocab_size=400, min_frequency=1, show_progress=False)
    tok.save_model(str(tok_dir))
    (tok_dir / "special_tokens.txt").write_text("\n".join(SPECIAL_TOKENS) + "\n")
    vocab = tok.get_vocab_size() + len(SPECIAL_TOKENS)

    torch.manual_seed(args.seed)
    # grouped-query attention as Aquila-33B's: 4 heads in 2 key/value groups
    cfg = tiny_llama_config(
        -(-vocab // 64) * 64,  # padded, as Megatron pads its vocabulary
        256,
        intermediate_size=160,
        num_key_value_heads=2,
    )
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(out / "checkpoint", max_shard_size="200KB")  # several shards
    state = {k: v.detach() for k, v in model.state_dict().items()}
    write_megatron(state, cfg.to_dict(), 2, out / "ckpts", iteration=1, seq_length=256)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--texts", type=int, default=256, help="synthetic LAMBADA texts")


# ------------------------------------------------------------------------------ --from
def hf_files(folder: Path) -> list[Path]:
    """config.json and the safetensors files an HF checkpoint folder needs (checked)."""
    from aquila_model import llama_config

    try:
        llama_config(folder)
    except ValueError as e:
        raise harness.InputError(str(e)) from None
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError, AttributeError):
            raise harness.InputError(f"{index}: no weight_map") from None
        files = [index, *(folder / n for n in names)]
    else:
        files = [folder / "model.safetensors"]
    for f in files:
        if not f.is_file():
            raise harness.InputError(f"{f}: missing")
    return [folder / "config.json", *files]


def stage(src: Path, out: Path) -> None:
    from lambada import TOKENIZER_FILES, load_tokenizer, read_lambada
    from megatron import LATEST, MegatronError, convert, rank_files

    data = next(
        (p for p in (src / "data" / LAMBADA, src / "data" / "lambada_test.jsonl") if p.is_file()),
        None,
    )
    if data is None:
        raise harness.InputError(f"{src / 'data' / LAMBADA}: missing")
    load_tokenizer(src / "tokenizer")  # their InputErrors name the file
    read_lambada(data)
    if (src / "checkpoint").is_dir():
        files, ckpts = hf_files(src / "checkpoint"), None
    elif (src / "ckpts").is_dir():
        try:
            rank_files(src / "ckpts")
        except MegatronError as e:
            raise harness.InputError(str(e)) from None
        files, ckpts = [], src / "ckpts"
    else:
        raise harness.InputError(
            f"{src / 'ckpts' / LATEST}: missing (and no HF {src / 'checkpoint'})"
        )
    if ckpts is not None:
        target = out / "checkpoint"
        if target.exists():
            shutil.rmtree(target)
        try:
            convert(ckpts, target)
        except MegatronError as e:
            shutil.rmtree(target, ignore_errors=True)
            raise harness.InputError(str(e)) from None
    for f in files:
        harness.link_or_copy(f, out / "checkpoint" / f.name)
    for name in TOKENIZER_FILES:
        harness.link_or_copy(src / "tokenizer" / name, out / "tokenizer" / name)
    harness.link_or_copy(data, out / "data" / LAMBADA)


if __name__ == "__main__":
    real = "tokenizer/, data/lambada_test_bak.jsonl, checkpoint/ (HF) or ckpts/ (Megatron)"
    sys.exit(
        harness.prepare_main(
            __file__, __doc__, synthetic, stage=stage, options=options, real_data=real
        )
    )
