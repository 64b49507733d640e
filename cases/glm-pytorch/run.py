"""glm-pytorch: GLM fine-tuned on SuperGLUE ReCoRD as a multi-token cloze (FlagPerf case).

    PYTHONPATH=<repo>/cases python cases/glm-pytorch/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

(or under torchrun), as docs/workload-contract.md says; the harness's ``Run``
(docs/harness.md) does the rest. Loads the GLM state dict (checkpoint/mp_rank_00_model_states.pt,
THUDM/GLM key names) and its WordPiece vocabulary, trains on FlagPerf's training examples of
ReCoRD (glm_data.py, prepared by prepare.py) with data parallelism in FlagPerf's sample order,
and every eval_every_samples training examples (over all ranks) scores the evaluation examples:
acc is exact match (see record.py). Stops when acc reaches target_acc or after max_samples
examples (FlagPerf's budget per config). AdamW (weight decay as hp layernorm_decay says) under
FlagPerf's warm-up and linear decay (glm_optim.py).

Precision as FlagPerf's code ran it: fp16 is its ``model.half()`` with float32 master weights
and dynamic loss scaling (glm_optim.py). The CPU config runs fp32.

A sample is one example: a question with one gold answer first and at most 9 other entities
(training) or with all its entities (evaluation); its candidates are one padded sequence each
(max_seq_length), and each example has as many as the batch's most (FlagPerf's my_collate:
padding candidates are computed, not scored); the loss is the cross-entropy over the
candidates' log-likelihoods, label 0. Throughputs count examples; tokens_per_s_per_device
counts the real candidates' tokens; MFU counts every sequence the device computed on.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import glm_data
import harness
import torch
from glm_model import GLMConfig, GLMModel, MultiTokenCloze, load_state_dict_file
from glm_optim import LAYERNORM_DECAY, glm_optimizer, optimize
from record import WordPiece, collate, encode_question, exact_match

CHECKPOINT, VOCAB = "checkpoint/mp_rank_00_model_states.pt", "checkpoint/vocab.txt"
MODEL_INPUTS = (
    "input_ids",
    "position_ids",
    "sep",
    "targets",
    "target_mask",
    "choice_index",
    "real_choice",
)


# ---------------------------------------------------------------------------------- data
def load_examples(path: Path, tok: WordPiece, max_len: int, train: bool) -> list[Any]:
    return [encode_question(tok, q, max_len) for q in glm_data.read_examples(path, train)]


def model_inputs(batch: dict[str, Any], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: batch[k].to(device, non_blocking=True) for k in MODEL_INPUTS}


# --------------------------------------------------------------------------------- model
def load_glm(run: harness.Run, tok: WordPiece) -> GLMModel:
    """The checkpoint's GLM, shape from its tensors, checked against the vocabulary and
    max_seq_length; InputError naming the file."""
    hp, path = run.hp, run.data / CHECKPOINT
    try:
        state = load_state_dict_file(path)  # its errors name the file
    except ValueError as e:
        raise harness.InputError(str(e)) from None
    try:
        cfg = GLMConfig.from_state_dict(
            state, hp.num_attention_heads, hp.dropout, hp.checkpoint_activations
        )
    except (ValueError, KeyError) as e:
        raise harness.InputError(f"{path}: {e}") from None
    if tok.size > cfg.vocab_size or hp.max_seq_length > cfg.max_sequence_length:
        raise harness.InputError(
            f"{path}: {cfg.vocab_size} token rows and {cfg.max_sequence_length} positions do not "
            f"fit {tok.size} tokens (vocab.txt + 2) and max_seq_length {hp.max_seq_length}"
        )
    glm = GLMModel(cfg)
    glm.load_state_dict(state)
    return glm


def model_flops(glm: GLMModel, seq_len: int) -> harness.ModelFlops:
    cfg, n_params = glm.config, harness.non_embedding_params(glm)
    per_token = harness.training_flops_per_token(
        n_params, cfg.num_layers, cfg.num_heads, cfg.head_dim, seq_len
    )
    return harness.ModelFlops(
        per_token,
        formula=f"6N+12LHQT, N={n_params} without embeddings, T={seq_len}, "
        "one padded sequence per candidate",
    )


def right(model: MultiTokenCloze, device: harness.Device, batch: dict[str, Any]) -> tuple[int, int]:
    """(right, counted) for one dev batch: exact match of the best-scored candidate."""
    scores = model(**model_inputs(batch, device.torch_device))
    picks = scores.argmax(-1).tolist()
    hits = sum(
        bool(q.candidates) and exact_match(q.candidates[pick], q.answers)
        for q, pick in zip(batch["questions"], picks, strict=True)
    )
    return hits, len(picks)


# ------------------------------------------------------------------------------ the run
def main(run: harness.Run) -> None:
    hp, device, max_len = run.hp, run.device, run.hp.max_seq_length
    try:  # these errors name their file
        tok = WordPiece(run.data / VOCAB)
    except ValueError as e:
        raise harness.InputError(str(e)) from None
    glm = load_glm(run, tok)
    flops = model_flops(glm, max_len)
    model = device.cast_weights(MultiTokenCloze(glm)).to(device.torch_device)
    ddp = run.data_parallel(model)  # evaluation runs on the bare model

    train = load_examples(run.data / glm_data.TRAIN, tok, max_len, train=True)
    dev = load_examples(run.data / glm_data.EVAL, tok, max_len, train=False)
    coll = partial(collate, max_len=max_len, tok=tok)
    source = str(run.data / glm_data.TRAIN)
    train_loader = glm_data.train_loader(run, train, hp.train_batch_size, coll, source)
    dev_loader = run.eval_loader(dev, hp.eval_batch_size, coll)
    optimizer, scheduler = glm_optimizer(device, model, hp)
    cfg = glm.config
    run.say(
        f"model: GLM {cfg.num_layers} layers, hidden {cfg.hidden_size}, {cfg.num_heads} heads; "
        f"{flops.formula}; train {len(train)} examples, dev {len(dev)}"
    )

    ddp.train()
    skipped = 0
    score = partial(right, model, device)
    evaluate = lambda: {"acc": run.accuracy(model, dev_loader, score)}  # noqa: E731
    for batch in run.train(train_loader, evaluate=evaluate):
        inputs = model_inputs(batch, device.torch_device)  # loading and copies: outside p_core
        labels = batch["labels"].to(device.torch_device, non_blocking=True)
        n_seq = inputs["input_ids"].shape[0]
        with run.step(len(labels), batch["real_tokens"], n_seq * max_len) as step:
            with device.autocast():
                step.loss = torch.nn.functional.cross_entropy(ddp(**inputs), labels)
            skipped += not optimize(run, step.loss, optimizer, scheduler, hp.clip_grad)
    notes = [
        "a sample is one FlagPerf GLM example (training: a gold answer first, at most 9 "
        "other entities), its candidates padded per batch",
        f"layernorm_decay={hp.layernorm_decay}: {LAYERNORM_DECAY[hp.layernorm_decay]}",
    ]
    if device.scaler is not None:
        notes.append(
            f"{hp.precision}: {skipped} of {run.steps} steps skipped for a loss-scale "
            "overflow (the learning rate not stepped either, as FlagPerf's)"
        )
    run.finish(flops, notes=notes)


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
