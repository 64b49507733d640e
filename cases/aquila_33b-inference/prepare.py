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
staged before everything is checked.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.staging import link_or_copy  # noqa: E402 - after the case's own directory

LAMBADA = "lambada_test_bak.jsonl"
SPECIAL_TOKENS = ("<|endoftext|>", "</s>", "<s>", "<|unk|>")
WORDS_TEXT = (
    "the a she he they it was were had said looked at into from with and but then "
    "door window house garden river road morning night cold warm old young quiet small "
    "mother father brother sister friend doctor teacher captain stranger dog horse bird "
    "opened closed walked ran smiled whispered waited turned found lost remembered "
    "letter key lamp book bottle coin ring map photograph"
)


class StageError(Exception):
    """A missing or malformed input file: one line naming it."""


# ----------------------------------------------------------------------------- synthetic
def sentence(rng: random.Random, n: int) -> str:
    words = WORDS_TEXT.split()
    return " ".join(rng.choice(words) for _ in range(n))


def synthetic(out: Path, seed: int, n_texts: int) -> None:
    import torch
    from megatron import write_megatron
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    rng = random.Random(seed)
    texts = [sentence(rng, rng.randint(12, 40)) for _ in range(n_texts)]
    (out / "data").mkdir(parents=True, exist_ok=True)
    with open(out / "data" / LAMBADA, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts)

    tok_dir = out / "tokenizer"
    tok_dir.mkdir(parents=True, exist_ok=True)
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=400, min_frequency=1, show_progress=False)
    tok.save_model(str(tok_dir))
    (tok_dir / "special_tokens.txt").write_text("\n".join(SPECIAL_TOKENS) + "\n")
    vocab = tok.get_vocab_size() + len(SPECIAL_TOKENS)

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=-(-vocab // 64) * 64,  # padded, as Megatron pads its vocabulary
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(out / "checkpoint", max_shard_size="200KB")  # several shards
    state = {k: v.detach() for k, v in model.state_dict().items()}
    write_megatron(state, cfg.to_dict(), 2, out / "ckpts", iteration=1, seq_length=256)


# ------------------------------------------------------------------------------ --from
def hf_files(folder: Path) -> list[Path]:
    """config.json and the safetensors files an HF checkpoint folder needs (checked)."""
    from aquila_model import llama_config

    try:
        llama_config(folder)
    except ValueError as e:
        raise StageError(str(e)) from None
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError, AttributeError):
            raise StageError(f"{index}: no weight_map") from None
        files = [index, *(folder / n for n in names)]
    else:
        files = [folder / "model.safetensors"]
    for f in files:
        if not f.is_file():
            raise StageError(f"{f}: missing")
    return [folder / "config.json", *files]


def stage(src: Path, out: Path) -> None:
    from lambada import TOKENIZER_FILES, DataError, load_tokenizer, read_lambada
    from megatron import LATEST, MegatronError, convert, rank_files

    if not src.is_dir():
        raise StageError(f"{src}: not a directory")
    data = next(
        (p for p in (src / "data" / LAMBADA, src / "data" / "lambada_test.jsonl") if p.is_file()),
        None,
    )
    if data is None:
        raise StageError(f"{src / 'data' / LAMBADA}: missing")
    try:
        load_tokenizer(src / "tokenizer")
        read_lambada(data)
    except DataError as e:
        raise StageError(str(e)) from None
    if (src / "checkpoint").is_dir():
        files, ckpts = hf_files(src / "checkpoint"), None
    elif (src / "ckpts").is_dir():
        try:
            rank_files(src / "ckpts")
        except MegatronError as e:
            raise StageError(str(e)) from None
        files, ckpts = [], src / "ckpts"
    else:
        raise StageError(f"{src / 'ckpts' / LATEST}: missing (and no HF {src / 'checkpoint'})")
    if ckpts is not None:
        target = out / "checkpoint"
        if target.exists():
            shutil.rmtree(target)
        try:
            convert(ckpts, target)
        except MegatronError as e:
            shutil.rmtree(target, ignore_errors=True)
            raise StageError(str(e)) from None
    for f in files:
        link_or_copy(f, out / "checkpoint" / f.name)
    for name in TOKENIZER_FILES:
        link_or_copy(src / "tokenizer" / name, out / "tokenizer" / name)
    link_or_copy(data, out / "data" / LAMBADA)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the case's data directory")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--synthetic", action="store_true", help="tiny offline model and data")
    source.add_argument("--from", dest="src", type=Path, help="a directory of the real files")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--texts", type=int, default=256)
    args = parser.parse_args(argv)
    if args.synthetic:
        synthetic(args.out, args.seed, args.texts)
        print(f"wrote synthetic aquila_33b-inference data to {args.out}")
        return 0
    if args.src is None:
        print(
            "give --from DIR (tokenizer/, data/lambada_test_bak.jsonl, and checkpoint/ in HF "
            f"layout or the Megatron ckpts/) or --synthetic; nothing staged in {args.out}",
            file=sys.stderr,
        )
        return 2
    try:
        stage(args.src, args.out)
    except StageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"staged {args.src} into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
