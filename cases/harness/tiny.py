"""Builders the cases' synthetic data share: a WordPiece vocabulary, a tiny Llama (BPE
tokenizer and config), a tiny Llama model folder with a word-level tokenizer, and the check of
an operator's Llama config.json."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.errors import InputError

WORDPIECE_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
LLAMA_SPECIAL = ("<unk>", "<s>", "</s>")
LETTERS = ("A", "B", "C", "D")
# Plain story words: the synthetic texts of llm-serving and the generate cases.
_STORY = (
    "the a she he they it was were had said looked at into from with and but then door "
    "window house garden river road morning night cold warm old young quiet small mother "
    "father brother sister friend doctor teacher captain stranger dog horse bird opened "
    "closed walked ran smiled whispered waited turned found lost remembered letter key lamp "
    "book bottle coin ring map photograph"
)
STORY_WORDS = tuple(_STORY.split())


def wordpiece_vocabulary(words: Iterable[str]) -> list[str]:
    """BERT's special tokens, the words, then every single character and its ``##``
    continuation: any word made of those characters stays tokenizable."""
    known = set(words)
    chars = sorted({c for w in known for c in w})
    return (
        list(WORDPIECE_SPECIAL)
        + sorted(known)
        + [c for c in chars if c not in known]
        + ["##" + c for c in chars]
    )


def train_bpe_tokenizer(texts: Iterable[str], out: Path, vocab_size: int = 512) -> Any:
    """A byte-free BPE tokenizer trained on ``texts``, saved (save_pretrained) to ``out``.

    It mimics Llama-2's where cases depend on it: sentencepiece-style word boundaries
    ("▁"), a BOS token prepended, "</s>" as EOS, and " A".."D" as single tokens ("▁A"),
    which an MMLU scorer reads the next-token logits of."""
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
    trainer = trainers.BpeTrainer(  # no progress: off a terminal its bar is blank lines
        vocab_size=vocab_size,
        special_tokens=list(LLAMA_SPECIAL),
        initial_alphabet=alphabet,
        show_progress=False,
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


def tiny_llama_config(vocab_size: int, max_positions: int = 1024, **shape: int) -> Any:
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


def save_word_llama(out: Path, words: Iterable[str], seed: int) -> None:
    """A tiny Llama-shaped decoder with random weights (2 layers, hidden 128, 4 heads, 256
    positions) and a word-level tokenizer over ``words`` (one token a whitespace-separated
    word, unknown words ``<unk>``), saved with ``save_pretrained`` into ``out``: a model
    folder transformers and vLLM load as they load a real one. Seeded."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast
    from transformers.utils import logging

    logging.disable_progress_bar()
    # ids 0, 1, 2: tiny_llama_config's bos 1 and eos 2
    known = dict.fromkeys((*LLAMA_SPECIAL, *words))
    vocab = {w: i for i, w in enumerate(known)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece()  # joins the words with spaces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.model_max_length = 256
    fast.save_pretrained(out)

    torch.manual_seed(seed)
    cfg = tiny_llama_config(
        len(vocab),
        256,
        hidden_size=128,
        intermediate_size=256,
        num_attention_heads=4,
        num_key_value_heads=4,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)


def check_llama_config(path: Path) -> dict[str, Any]:
    """An HF config.json of model_type llama, as a dict; InputError naming the file."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        model_type = config.get("model_type")
        int(config["vocab_size"])
    except FileNotFoundError:
        raise InputError(f"missing data: {path}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError(f"{path}: not a Llama config: {e}") from None
    if model_type != "llama":
        raise InputError(f"{path}: model_type is {model_type!r}, expected 'llama'")
    return config
