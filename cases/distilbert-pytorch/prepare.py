"""Stage the distilbert-pytorch data directory.

    python cases/distilbert-pytorch/prepare.py --out DATA_DIR --synthetic
    python cases/distilbert-pytorch/prepare.py --out DATA_DIR --from DIR

--synthetic writes, offline and deterministically (seeded):

    DATA_DIR/checkpoint/   a tiny DistilBERT (save_pretrained, safetensors) + its WordPiece
                           tokenizer (vocab.txt, tokenizer.json), loadable with from_pretrained
    DATA_DIR/SST-2/train.tsv, dev.tsv   GLUE SST-2 layout: header "sentence<TAB>label"
    DATA_DIR/dataset/train_dataset.npz, eval_dataset.npz
                           the same rows pre-tokenised as FlagPerf's create_train_eval_data.py
                           writes them (sst2.py): what run.py reads

The sentences are movie-review templates: one or two sentiment words of one polarity among
neutral filler, label 1 positive / 0 negative, no label noise. A small model learns them in a
few hundred steps, which is what a CPU smoke run of the benchmark needs.

--from DIR: the real SST-2 and distilbert-base-uncased, in either layout:

    DIR/model/ (or checkpoint/)     the HF checkpoint (config.json, vocab.txt, weights)
    DIR/dataset/train_dataset.npz, eval_dataset.npz
                                    FlagPerf's distilbert_train.tar (DIR may also be where
                                    the tar was unpacked, holding distilbert/)
    DIR/SST-2/train.tsv, dev.tsv    or GLUE's SST-2 TSVs instead of dataset/

The checkpoint is hard-linked (copied across filesystems) as DATA_DIR/checkpoint/, GLUE's
TSVs likewise, and tokenised into DATA_DIR/dataset/*.npz. FlagPerf's .npz files hold the
sentences, labels and the token ids its preprocessing made (idx, sentence, label, input_ids,
attention_mask; padded to 512): once the checkpoint's tokenizer is checked to give every row
exactly the ids the file holds, they are hard-linked as DATA_DIR/dataset/*.npz (run.py
reads them, as FlagPerf's run did) and written out as the TSVs.
The first missing or malformed file is named in one line on stderr, exit code 2, nothing
staged.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import harness
import sst2
from harness.tiny import wordpiece_vocabulary


def _words(text: str) -> list[str]:
    return text.split()


POSITIVE = _words(
    "good great excellent wonderful delightful brilliant charming moving superb funny "
    "engaging beautiful fresh clever warm enjoyable remarkable gripping touching masterful "
    "splendid vivid witty heartfelt stunning lovely inventive powerful smart terrific"
)
NEGATIVE = _words(
    "bad awful boring dull terrible tedious clumsy bland weak lifeless messy painful "
    "predictable shallow stale tiresome ugly flat pointless dreadful forgettable incoherent "
    "lame sloppy mediocre annoying hollow silly wooden bloated"
)
NOUNS = _words(
    "film movie story plot script cast director performance ending dialogue soundtrack "
    "camera scene character hero villain sequel screenplay pacing comedy drama thriller "
    "documentary romance picture production lead actor actress score"
)
ADVERBS = _words("very quite rather truly simply often mostly really fairly so")
FILLER = _words(
    "the a an this that it its of in on at with about from for by as and to is was are "
    "feels seems looks runs plays comes turns out over after before during two hours "
    "minutes town city family summer winter night war school friends brother sister "
    "mother father old young new small big long short first last one another every "
    "some most such yet still just even also then there here which who when while where"
)
TEMPLATES = (
    "the {noun} is {adv} {s1}",
    "a {s1} {noun} about {f1} {f2} {f3}",
    "{f1} {f2} {noun} , and it is {adv} {s1}",
    "it 's a {s1} and {s2} {noun} {f1} {f2} {f3} {f4}",
    "{f1} {f2} {f3} {f4} {f5} the {noun} , {s1} {f6} {f7}",
    "even with {f1} {f2} {noun} , the {noun2} feels {s1}",
    "{adv} {s1} .",
    "the {noun} {f1} {f2} {f3} {f4} {f5} {f6} {f7} {f8} {f9} is {s1} and {s2}",
    "what a {s1} {noun}",
    "{f1} {f2} {f3} {noun} {f4} {f5} {f6} {f7} {f8} {f9} {f10} {f11} , {adv} {s1}",
)


def sentence(rng: random.Random, label: int) -> str:
    words = POSITIVE if label else NEGATIVE
    fill = {f"f{i}": rng.choice(FILLER) for i in range(1, 12)}
    return rng.choice(TEMPLATES).format(
        noun=rng.choice(NOUNS),
        noun2=rng.choice(NOUNS),
        adv=rng.choice(ADVERBS),
        s1=rng.choice(words),
        s2=rng.choice(words),
        **fill,
    )


def write_tsv(path: Path, rows: list[tuple[str, int]], end: str = " ") -> None:
    """GLUE's SST-2 TSV (its sentences end with a space: ``end`` adds it to synthetic ones)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("sentence\tlabel\n")
        for text, label in rows:
            f.write(f"{text}{end}\t{label}\n")


def make_rows(rng: random.Random, n: int) -> list[tuple[str, int]]:
    labels = [i % 2 for i in range(n)]
    rng.shuffle(labels)
    return [(sentence(rng, label), label) for label in labels]


def vocabulary() -> list[str]:
    words = set(POSITIVE + NEGATIVE + NOUNS + ADVERBS + FILLER)
    for template in TEMPLATES:
        words.update(w for w in template.split() if "{" not in w)
    return wordpiece_vocabulary(words)


def save_tokenizer(vocab: list[str], out: Path) -> None:
    import transformers
    from transformers import DistilBertTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    if int(transformers.__version__.split(".")[0]) >= 5:
        tokenizer = DistilBertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    else:
        tokenizer = DistilBertTokenizerFast(vocab_file=str(out / "vocab.txt"))
    tokenizer.model_max_length = 512
    tokenizer.save_pretrained(out)


def tiny_config(vocab_size: int) -> Any:
    """The synthetic checkpoint's shape: DistilBERT with dim 64, 2 layers, 2 heads."""
    from transformers import DistilBertConfig

    return DistilBertConfig(
        vocab_size=vocab_size,
        max_position_embeddings=512,
        dim=64,
        n_layers=2,
        n_heads=2,
        hidden_dim=256,
        dropout=0.1,
        attention_dropout=0.1,
        seq_classif_dropout=0.1,
        num_labels=2,
        id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
    )


def save_model(vocab_size: int, out: Path, seed: int) -> None:
    import torch
    import transformers
    from transformers import DistilBertForSequenceClassification

    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(seed)
    model = DistilBertForSequenceClassification(tiny_config(vocab_size))
    model.save_pretrained(out, safe_serialization=True)


def synthetic(out: Path, args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    sst = out / "SST-2"
    sst.mkdir(parents=True, exist_ok=True)
    write_tsv(sst / "train.tsv", make_rows(rng, args.train_rows))
    write_tsv(sst / "dev.tsv", make_rows(rng, args.dev_rows))
    vocab = vocabulary()
    save_tokenizer(vocab, out / "checkpoint")
    save_model(len(vocab), out / "checkpoint", args.seed)
    tokenize(out)


def tokenize(out: Path) -> None:
    """The staged TSVs pre-tokenised by the staged checkpoint's tokenizer (dataset/*.npz)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out / "checkpoint")
    for tsv, npz in NPZ_SPLITS.items():
        sst2.write_npz(out / "dataset" / npz, sst2.read_tsv(out / "SST-2" / tsv), tokenizer)


CHECKPOINT_FILES = ("config.json", "vocab.txt")  # and the weights, and tokenizer files if any
# FlagPerf's pre-tokenized SST-2 (its data_preprocessing/create_train_eval_data.py).
NPZ_SPLITS = {"train.tsv": "train_dataset.npz", "dev.tsv": "eval_dataset.npz"}
NPZ_KEYS = ("sentence", "label", "input_ids", "attention_mask")


def _root(src: Path) -> Path:
    """``src``, or the ``distilbert/`` directory FlagPerf's tar unpacks to inside it."""
    inner = src / "distilbert"
    named = ("model", "checkpoint", "dataset", "SST-2")
    return inner if inner.is_dir() and not any((src / n).exists() for n in named) else src


def check_checkpoint(ckpt: Path) -> None:
    for name in CHECKPOINT_FILES:
        if not (ckpt / name).is_file():
            raise harness.InputError(f"missing data: {ckpt / name}")
    try:
        model_type = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))["model_type"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise harness.InputError(f"{ckpt / 'config.json'}: not a model config: {e}") from None
    if model_type != "distilbert":
        raise harness.InputError(f"{ckpt / 'config.json'}: model_type is {model_type!r}")
    weights = [p for p in ckpt.iterdir() if p.suffix in (".safetensors", ".bin")]
    if not weights:
        raise harness.InputError(f"missing data: {ckpt}/model.safetensors (or *.bin)")


def check_tsv(tsv: Path) -> None:
    try:
        header = tsv.read_text(encoding="utf-8").split("\n", 1)[0].split("\t")
    except OSError:
        raise harness.InputError(f"missing data: {tsv}") from None
    if "sentence" not in header or "label" not in header:
        raise harness.InputError(f"{tsv}: header must have 'sentence' and 'label' columns")


def read_npz(path: Path, tokenizer: Any) -> list[tuple[str, int]]:
    """FlagPerf's .npz -> [(sentence, label)], checked: the arrays agree in length, labels
    are 0/1, and ``tokenizer`` gives each sentence the ids the file holds (no pickles)."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as f:
            missing = [k for k in NPZ_KEYS if k not in f.files]
            if missing:
                raise harness.InputError(f"{path}: no array {missing[0]!r} (has {f.files})")
            sentences, labels, ids, mask = (f[k] for k in NPZ_KEYS)
    except (OSError, ValueError) as e:  # missing, not a zip, object arrays (pickles)
        raise harness.InputError(f"{path}: {e}") from None
    if sentences.dtype.kind != "U" or ids.ndim != 2 or mask.shape != ids.shape:
        raise harness.InputError(f"{path}: sentence must be text, input_ids/attention_mask N x L")
    if not len(sentences) == len(labels) == len(ids) or not set(labels.tolist()) <= {0, 1}:
        raise harness.InputError(f"{path}: sentence, label, input_ids: lengths or labels differ")
    sentences = sentences.tolist()
    got = tokenizer(sentences, truncation=True, max_length=ids.shape[1])["input_ids"]
    for i, (text, row, n) in enumerate(zip(sentences, ids, mask.sum(axis=1), strict=True)):
        if "\t" in text or "\n" in text or got[i] != row[:n].tolist():
            raise harness.InputError(
                f"{path}: row {i}: the checkpoint's tokenizer does not give its sentence"
                " the input_ids the file holds (or it holds a tab or newline)"
            )
    return list(zip(sentences, labels.tolist(), strict=True))


def stage(src: Path, out: Path) -> None:
    """Check everything in ``src`` (either layout), then stage the checkpoint and TSVs."""
    root = _root(src)
    ckpt = next((root / n for n in ("model", "checkpoint") if (root / n).is_dir()), None)
    if ckpt is None:
        raise harness.InputError(f"missing data: {root}/model (or checkpoint)")
    check_checkpoint(ckpt)
    rows: dict[str, list[tuple[str, int]]] = {}
    if (root / "dataset").is_dir():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(ckpt)
        rows = {tsv: read_npz(root / "dataset" / npz, tokenizer) for tsv, npz in NPZ_SPLITS.items()}
    else:
        for name in NPZ_SPLITS:
            check_tsv(root / "SST-2" / name)
    for f in sorted(p for p in ckpt.iterdir() if p.is_file()):
        harness.link_or_copy(f, out / "checkpoint" / f.name)
    (out / "SST-2").mkdir(parents=True, exist_ok=True)
    for name, npz in NPZ_SPLITS.items():
        if rows:
            (out / "SST-2" / name).unlink(missing_ok=True)  # never through a staged link
            write_tsv(out / "SST-2" / name, rows[name], end="")
            harness.link_or_copy(root / "dataset" / npz, out / "dataset" / npz)
        else:
            harness.link_or_copy(root / "SST-2" / name, out / "SST-2" / name)
    if not rows:
        tokenize(out)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--train-rows", type=int, default=6000)
    parser.add_argument("--dev-rows", type=int, default=872)  # real SST-2 dev has 872


if __name__ == "__main__":
    sys.exit(
        harness.prepare_main(
            __file__,
            __doc__,
            synthetic,
            stage=stage,
            options=options,
            real_data="FlagPerf's distilbert_train.tar unpacked (model/, dataset/*.npz), or a "
            "checkpoint/ (distilbert-base-uncased) beside GLUE's SST-2/train.tsv, dev.tsv",
        )
    )
