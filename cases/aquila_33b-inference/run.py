"""aquila_33b-inference: Aquila-33B on LAMBADA, tensor parallel over a node (FlagPerf case).

    PYTHONPATH=<repo>/cases python -m torch.distributed.run --nproc_per_node P \
        cases/aquila_33b-inference/run.py --config RUN_DIR/config.json \
        --data-dir DATA_DIR --run-dir RUN_DIR

Follows docs/workload-contract.md; the harness's ``Run`` (docs/harness.md) does the rest.
Every process of the node holds 1/P of the model (aquila_model.py: transformers'
tensor-parallel plan on torch DTensor) and all of them run the same batches, so the run is
one tensor-parallel group (``run.parallel(tp=P)``) that counts each batch once. Texts are
framed as ``framing`` says (lambada.py: FlagScale's, the seed's, by default). Two kinds of
pass over LAMBADA (data/lambada_test_bak.jsonl), in batches of ``eval_batch_size``:

- validation: forward, then loss (FlagScale's: the mean over texts of each text's mean
  NLL), loss_per_token (over the whole set) and last-word accuracy (acc) -> p_val_whole
  (positions computed / pass wall time, batching and scoring included) and p_val_core
  (positions computed / forward time, device synchronised);
- inference: ``infer_passes`` forward-only passes -> p_infer_whole and p_infer_core, alike:
  the positions the model computed, padding included, as FlagScale counts them (4096 a
  text on the seed's row); p_infer_real_whole and p_infer_real_core count real tokens.

The first ``warmup_steps`` forwards of each kind are left out of its rates. MFU: inference
FLOPs (2N + 4LHQT, T the mean padded length) of the padded tokens of the counted inference
forwards / their wall time / devices / the chip's peak.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import astuple
from functools import partial
from typing import Any

import aquila_model
import harness
import lambada
import torch

DATA = "data/lambada_test_bak.jsonl"
Timer = Callable[[int, int, int], AbstractContextManager[Any]]


@contextmanager
def timed(tracker: harness.PerfTracker, samples: int, tokens: int, padded: int) -> Iterator[None]:
    """A forward as one step of ``tracker`` (the validation pass's own timers)."""
    tracker.step_begin()
    yield
    tracker.step_end(samples, tokens, padded)


def forward_pass(
    run: harness.Run,
    model: Any,
    groups: list[list[lambada.Example]],
    pad_id: int,
    step: Timer,
    scoring: bool = False,
) -> lambada.Scores:
    """One pass over the batches, each forward timed by ``step(samples, real, padded)``;
    the summed scores when ``scoring``. FlagScale's framing pads every text to
    max_seq_length under a causal mask alone (pads come last, so no real position sees
    one); the plain framing pads to the batch's longest with an attention mask."""
    flagscale = run.hp.framing == "flagscale"
    length = run.hp.max_seq_length if flagscale else 0
    total = lambada.Scores(0.0, 0, 0, 0.0)
    for group in groups:
        batch = {
            k: v.to(run.device.torch_device)
            for k, v in lambada.collate(group, pad_id, length).items()
        }
        real = int(batch["attention_mask"].sum())
        timer = step(len(group), real, batch["input_ids"].numel())
        mask = None if flagscale else batch["attention_mask"]
        with timer, torch.inference_mode(), run.device.autocast():
            logits = model(input_ids=batch["input_ids"], attention_mask=mask)
        if scoring:
            s = lambada.score(logits.logits, batch)
            total = lambada.Scores(
                *(a + b for a, b in zip(astuple(total), astuple(s), strict=True))
            )
    return total


def main(run: harness.Run) -> None:
    hp, env = run.hp, run.env
    if env.world_size != env.local_world_size:
        raise harness.InputError(
            f"{run.case.name}: tensor parallelism spans one node; got {env.world_size} "
            f"processes over nodes of {env.local_world_size}"
        )
    if run.precision not in aquila_model.DTYPES:
        raise harness.InputError(f"precision {run.precision!r}: this case runs fp32, fp16 or bf16")
    tp = run.parallel(tp=env.world_size).tp

    tok = lambada.load_tokenizer(run.data / "tokenizer")
    texts = lambada.read_lambada(run.data / DATA)[: hp.max_texts or None]
    try:
        model = aquila_model.load(
            run.data / "checkpoint", run.precision, tp, run.device.torch_device
        )
    except ValueError as e:  # names the file
        raise harness.InputError(str(e)) from None
    cfg = model.config
    if tok.get_vocab_size() > cfg.vocab_size:
        raise harness.InputError(
            f"{run.data / 'tokenizer'}: {tok.get_vocab_size()} tokens, "
            f"the model has {cfg.vocab_size}"
        )
    if hp.framing == "flagscale":
        cls, eod = lambada.special_ids(tok, run.data / "tokenizer")
        examples = lambada.encode_flagscale(tok, texts, hp.max_seq_length, cls, eod)
    else:
        examples = lambada.encode(tok, texts, hp.max_seq_length)
    groups = lambada.batches(examples, hp.eval_batch_size)
    pad_id = tok.token_to_id("<|endoftext|>") or 0  # padding is masked: any id works
    n_params = harness.non_embedding_params(model)  # DTensor numel() is the global size
    longest = (
        hp.max_seq_length if hp.framing == "flagscale" else max(len(e.ids) for e in g)
        for g in groups
    )
    mean_len = round(sum(len(g) * t for g, t in zip(groups, longest, strict=True)) / len(examples))
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    flops = harness.ModelFlops(
        harness.inference_flops_per_token(
            n_params, cfg.num_hidden_layers, cfg.num_attention_heads, head_dim, mean_len
        ),
        formula=f"inference 2N+4LHQT, N={n_params} without embeddings, "
        f"T={mean_len} the mean padded length",
    )
    run.say(
        f"model: {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, "
        f"{cfg.num_attention_heads} heads / {cfg.num_key_value_heads} groups, {n_params} "
        f"non-embedding params; {len(examples)} texts in {len(groups)} batches"
    )

    val = run.tracker()  # validation: its own timers, outside the inference window
    val.train_begin()
    scores = forward_pass(run, model, groups, pad_id, partial(timed, val), True)
    val.train_end()
    loss, acc = scores.text_loss / len(examples), scores.right / len(examples)
    run.events.emit("eval", name="acc", value=acc, samples=len(examples))
    run.say(f"validation: loss {loss:.4f}, last-word acc {acc:.4f}")
    run.memory.sample()

    for _ in range(hp.infer_passes):  # run.step: the inference window, counted once per group
        forward_pass(run, model, groups, pad_id, run.step)
        run.log(loss=loss)
    p_val_whole, p_val_core = harness.token_rates(run.totals(val), padded=True)
    run.finish(
        flops,
        metrics={
            "acc": acc,
            "loss": loss,
            "loss_per_token": scores.nll / scores.tokens,
            "p_val_whole": p_val_whole,
            "p_val_core": p_val_core,
        },
        converged=True,
        notes=[
            f"framing: {hp.framing}, batch {hp.eval_batch_size}"
            + (f", every text padded to {hp.max_seq_length}" if hp.framing == "flagscale" else ""),
            "acc: LAMBADA last-word accuracy (every token of the last word greedy-right)",
            "loss: the mean over texts of each text's mean NLL (FlagScale's avg loss); "
            "loss_per_token: the mean NLL per token over the whole set",
            f"p_val_*, p_infer_*: positions computed (padding included, FlagScale's count) "
            f"per second of the whole tensor-parallel group of {tp}; p_infer_real_*: real "
            f"tokens; the first {hp.warmup_steps} forwards of each kind left out",
        ],
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
