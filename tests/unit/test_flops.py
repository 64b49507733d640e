"""Each FLOPs formula the cases use, against torch's FlopCounterMode.

Small transformers models with eager attention run real forward and backward passes on the
CPU; FlopCounterMode counts every matmul (mm, addmm, bmm, ...) they ran. The formula may
exceed the count by at most the tolerance written in docs/harness.md and never fall short:

- encoder with head: the biases and LayerNorm weights in N are not matmul FLOPs (1.7 % of N
  at dim 64, 0.1 % at DistilBERT-base's 768)
- decoder, training and inference: the RMSNorm weights in N (0.2 % at dim 64)
- LoRA: besides those, the first layer's q, k and v never compute an input gradient (the
  embeddings are frozen), which 4N assumes they do (about 2 % at 4 layers of dim 64)

The same formulas at the real models' sizes are checked on the meta device (shapes only:
FlopCounterMode counts from shapes), where the gaps shrink as the docstring says.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable

import pytest
from conftest import REPO

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402

B, T = 2, 32  # batch and sequence length of the small runs
TOLERANCE = {"encoder": 0.02, "decoder": 0.01, "lora": 0.05, "inference": 0.01}


def distilbert_run():
    """cases/distilbert-pytorch/run.py as a module of its own name (other cases have a run.py
    too): its model_flops is the counting under test."""
    path = REPO / "cases" / "distilbert-pytorch" / "run.py"
    if str(path.parent) not in sys.path:  # its own modules (flagperf_trainer.py, sst2.py)
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("distilbert_pytorch_run", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def counted(run: Callable[[], None]) -> int:
    with FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


def within(formula: float, count: int, tolerance: float) -> None:
    assert count > 0
    assert 0.0 <= formula / count - 1.0 <= tolerance, (formula, count)


def small_llama() -> transformers.LlamaForCausalLM:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=500,
        hidden_size=64,
        intermediate_size=172,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    return transformers.LlamaForCausalLM(config)


def test_encoder_with_classifier_head_training():
    torch.manual_seed(0)
    config = transformers.DistilBertConfig(
        vocab_size=500,
        dim=64,
        n_layers=4,
        n_heads=4,
        hidden_dim=256,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    model = transformers.DistilBertForSequenceClassification(config)
    ids, labels = torch.randint(5, 500, (B, T)), torch.tensor([0, 1])
    count = counted(lambda: model(input_ids=ids, labels=labels).loss.backward())

    flops = distilbert_run().model_flops(model, T)
    within(flops.of(B * T, B), count, TOLERANCE["encoder"])
    # counting the head per token instead would overshoot by more than the tolerance
    per_token_head = flops.per_token + flops.per_sequence
    assert per_token_head * B * T / count - 1 > TOLERANCE["encoder"]


def test_decoder_training():
    model = small_llama()
    ids = torch.randint(5, 500, (B, T))
    count = counted(lambda: model(input_ids=ids, labels=ids).loss.backward())
    n = harness.non_embedding_params(model)
    within(harness.training_flops_per_token(n, 4, 4, 16, T) * B * T, count, TOLERANCE["decoder"])


def test_decoder_lora_training():
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(
        small_llama(),
        peft.LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0),
    )
    ids = torch.randint(5, 500, (B, T))
    count = counted(lambda: model(input_ids=ids, labels=ids).loss.backward())
    n_lora = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert n_lora == 4 * 2 * 8 * (64 + 64)  # r=8 on q and v of 4 layers: A and B
    n_frozen = harness.non_embedding_params(model) - n_lora
    flops = harness.lora_training_flops_per_token(n_frozen, n_lora, 4, 4, 16, T) * B * T
    within(flops, count, TOLERANCE["lora"])


def test_decoder_inference_prefill():
    model = small_llama().eval()
    ids = torch.randint(5, 500, (B, T))

    def forward() -> None:
        with torch.no_grad():
            model(input_ids=ids)

    count = counted(forward)
    n = harness.non_embedding_params(model)
    within(harness.inference_flops_per_token(n, 4, 4, 16, T) * B * T, count, TOLERANCE["inference"])


@pytest.mark.slow  # real model sizes, built on the meta device
def test_real_sizes_on_the_meta_device():
    """DistilBERT-base at T=512 and Llama-2-7B at T=1024: within 0.5 % (shapes only)."""
    with torch.device("meta"):
        bert = transformers.DistilBertForSequenceClassification(
            transformers.DistilBertConfig(attn_implementation="eager")
        )
        ids = torch.zeros((1, 512), dtype=torch.long)
        labels = torch.zeros(1, dtype=torch.long)
    count = counted(lambda: bert(input_ids=ids, labels=labels).loss.backward())
    within(distilbert_run().model_flops(bert, 512).of(512, 1), count, 0.005)

    config = transformers.LlamaConfig(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=32000,
        attn_implementation="eager",
    )
    with torch.device("meta"):
        llama = transformers.LlamaForCausalLM(config)
        ids = torch.zeros((1, 1024), dtype=torch.long)
    n = harness.non_embedding_params(llama)
    count = counted(lambda: llama(input_ids=ids, labels=ids).loss.backward())
    within(harness.training_flops_per_token(n, 32, 32, 128, 1024) * 1024, count, 0.005)
