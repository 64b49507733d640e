"""aquila_33b-inference: Aquila-33B on LAMBADA, tensor parallel over a node (FlagPerf case).

    PYTHONPATH=<repo>/cases python -m torch.distributed.run --nproc_per_node P \
        cases/aquila_33b-inference/run.py --config RUN_DIR/config.json \
        --data-dir DATA_DIR --run-dir RUN_DIR

Follows docs/workload-contract.md; the harness's ``Run`` (docs/harness.md) does the rest.
Every process of the node holds 1/P of the model (aquila_model.py: transformers'
tensor-parallel plan on torch DTensor, the output head's logits left split over the
vocabulary) and all of them run the same batches, so the run is one tensor-parallel group
(``run.parallel(tp=P)``) that counts each batch once. Texts are framed as ``framing`` says
(lambada.py: FlagScale's, the seed's, by default).

One scored pass over LAMBADA (data/lambada_test_bak.jsonl) in batches of
``eval_batch_size``, as FlagScale's evaluate.py loop: each batch's host-to-device copy,
forward and vocabulary-parallel cross-entropy (vocab_parallel.py) is one ``run.step``, so
p_infer_core is positions computed (padding included, 4096 a text on the seed's row) per
second of those, and p_infer_whole per second of the pass; p_infer_real_* count real tokens.
Then loss (FlagScale's: the mean over texts of each text's mean NLL), loss_per_token and
last-word accuracy (acc, fleetperf's: greedy ids over the vocabulary slices). The first
``warmup_steps`` batches are left out of the rates. MFU: inference FLOPs (2N + 4LHQT, T the
mean padded length) of the counted batches / their wall time / devices / the chip's peak.
"""

from __future__ import annotations

import sys
from typing import Any

import aquila_model
import harness
import lambada
import torch
import vocab_parallel as vp

DATA = "data/lambada_test_bak.jsonl"


def scored_pass(
    run: harness.Run, model: Any, groups: list[list[lambada.Example]], pad_id: int, start: int
) -> vp.Scores:
    """The batches' summed scores; ``start``: the first vocabulary id of this rank's logits.
    FlagScale's framing pads every text to max_seq_length under a causal mask alone (pads
    come last, so no real position sees one); the plain framing pads to the batch's longest
    with an attention mask."""
    flagscale = run.hp.framing == "flagscale"
    length = run.hp.max_seq_length if flagscale else 0
    total = vp.Scores(0.0, 0, 0, 0.0)
    for group in groups:
        host = lambada.collate(group, pad_id, length)
        real, padded = int(host["attention_mask"].sum()), host["input_ids"].numel()
        with run.step(len(group), real, padded), torch.inference_mode(), run.device.autocast():
            batch = {k: v.to(run.device.torch_device) for k, v in host.items()}
            mask = None if flagscale else batch["attention_mask"]
            logits = model(input_ids=batch["input_ids"], attention_mask=mask).logits[:, :-1]
            nll, peak = vp.token_nll(logits, batch["input_ids"][:, 1:], start)
            texts = vp.text_means(nll, batch["attention_mask"][:, 1:].float())
        with torch.inference_mode():  # acc: fleetperf's, after FlagScale's window
            total += vp.tally(nll, texts, vp.greedy(logits, start, peak), batch)
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

    scores = scored_pass(run, model, groups, pad_id, vp.vocab_start(aquila_model.head_rows(model)))
    loss, acc = scores.text_loss / len(examples), scores.right / len(examples)
    run.events.emit("eval", name="acc", value=acc, samples=len(examples))
    run.say(f"scored pass: loss {loss:.4f}, last-word acc {acc:.4f}")
    run.log(loss=loss)
    run.finish(
        flops,
        metrics={
            "acc": acc,
            "loss": loss,
            "loss_per_token": scores.nll / scores.tokens,
        },
        converged=True,
        notes=[
            f"framing: {hp.framing}, batch {hp.eval_batch_size}"
            + (f", every text padded to {hp.max_seq_length}" if hp.framing == "flagscale" else ""),
            "acc: LAMBADA last-word accuracy (every token of the last word greedy-right)",
            "loss: the mean over texts of each text's mean NLL (FlagScale's avg loss); "
            "loss_per_token: the mean NLL per token over the whole set",
            f"p_infer_*: positions computed (padding included, FlagScale's count) per second "
            f"of the whole tensor-parallel group of {tp} over one scored pass (no separate "
            f"validation pass: p_val_* unset, as the seed's '/'); p_infer_real_*: real "
            f"tokens; the first {hp.warmup_steps} batches left out",
        ],
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
