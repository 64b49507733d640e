"""A tiny Llama for synthetic data: a BPE tokenizer trained on the synthetic text, and a small
LlamaConfig. Both Llama cases stage their synthetic checkpoints with it (the deepspeed case
imports this file from here), so their tiny models share one shape.

The tokenizer mimics Llama-2's where the cases depend on it: sentencepiece-style word
boundaries ("▁"), a BOS token prepended, "</s>" as EOS, and " A".."D" as single tokens
("▁A"), which the MMLU scorer reads the next-token logits of.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

SPECIAL = ("<unk>", "<s>", "</s>")
LETTERS = ("A", "B", "C", "D")


def train_tokenizer(texts: Iterable[str], out: Path, vocab_size: int = 512) -> Any:
    """Train a byte-free BPE tokenizer on ``texts`` and save it (save_pretrained) to ``out``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = list(texts)
    alphabet = sorted({c for text in corpus for c in text})
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("\n", behavior="isolated"),
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL), initial_alphabet=alphabet
    )
    # Every letter answer appears as a word often enough to become its own token.
    tok.train_from_iterator([*corpus, *(f"Answer: {x}" for x in LETTERS * 50)], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.model_max_length = 4096
    fast.save_pretrained(out)
    return fast


def tiny_config(vocab_size: int, max_positions: int = 1024, **shape: int) -> Any:
    """Llama-2's architecture at a tiny width: 2 layers, 4 heads of 16, hidden 64."""
    from transformers import LlamaConfig

    dims = {
        "hidden_size": 64,
        "intermediate_size": 172,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        **shape,
    }
    return LlamaConfig(
        vocab_size=vocab_size,
        max_position_embeddings=max_positions,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        **dims,
    )
