"""openwebtext raw text -> one flat array of Llama-2 token ids (.npy), the case's training data.

    python cases/llama2_7b-deepspeed/preprocess.py --tokenizer DATA_DIR/llama2_7b_hf \
        --text-dir OPENWEBTEXT_DIR --out DATA_DIR/openwebtext_llama2_100M.npy --million-tokens 100

OPENWEBTEXT_DIR holds the corpus as plain UTF-8 text files, one document each (openwebtext's
urlsf_subset*.xz archives unpack to such *.txt files). Files are read in name order, each is
tokenized with BOS (as FlagPerf's data_process.py does) and followed by EOS so that document
boundaries survive concatenation, and the ids are appended until --million-tokens is
reached. The array is uint16 when the vocabulary fits (Llama-2: 32,000), else int32.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def token_ids(text_dir: Path, tokenizer: object, limit: int) -> np.ndarray:
    files = sorted(p for p in text_dir.rglob("*.txt") if p.is_file())
    if not files:
        raise SystemExit(f"error: no *.txt files under {text_dir}")
    dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.int32
    chunks, total = [], 0
    for path in files:
        ids = tokenizer(path.read_text(encoding="utf-8"))["input_ids"] + [tokenizer.eos_token_id]
        chunks.append(np.asarray(ids, dtype=dtype))
        total += len(ids)
        if total >= limit:
            break
    return np.concatenate(chunks)[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", required=True, type=Path, help="Llama-2 tokenizer dir")
    parser.add_argument("--text-dir", required=True, type=Path, help="openwebtext *.txt files")
    parser.add_argument("--out", required=True, type=Path, help="the .npy file to write")
    parser.add_argument("--million-tokens", type=float, default=100.0)
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    ids = token_ids(args.text_dir, tokenizer, int(args.million_tokens * 1e6))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, ids)
    print(f"wrote {len(ids)} tokens ({ids.dtype}) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
