"""aquila_33b-inference: Aquila-33B on LAMBADA, tensor parallel over a node (FlagPerf case).

    PYTHONPATH=<repo>/cases python -m torch.distributed.run --nproc_per_node P \
        cases/aquila_33b-inference/run.py --config RUN_DIR/config.json \
        --data-dir DATA_DIR --run-dir RUN_DIR

Follows docs/workload-contract.md. Every process of the node holds 1/P of the model
(aquila_model.py: transformers' tensor-parallel plan on torch DTensor) and all of them run the
same batches. Two passes over LAMBADA (data/lambada_test_bak.jsonl), batches of similar
lengths, right-padded:

- validation: forward, then loss (mean token NLL over the set) and last-word accuracy (acc)
  -> p_val_whole (real tokens / pass wall time, batching and scoring included) and
  p_val_core (real tokens / forward time, device synchronised);
- inference: ``infer_passes`` forward-only passes -> p_infer_whole and p_infer_core, alike.

The first ``warmup_steps`` forwards of each pass are left out of its rates. MFU: inference
FLOPs (2N + 4LHQT, T the mean padded length) of the padded tokens of the counted inference
forwards / their wall time / devices / the chip's peak.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import aquila_model
import harness
import torch
from lambada import DataError, batches, collate, encode, load_tokenizer, read_lambada, score

CASE = "aquila_33b-inference"
CHECKPOINT, TOKENIZER = "checkpoint", "tokenizer"
DATA = "data/lambada_test_bak.jsonl"
HP_KEYS = ("eval_batch_size", "max_seq_length", "infer_passes", "warmup_steps", "max_texts")


def run_pass(
    model: Any,
    groups: list[list[Any]],
    pad_id: int,
    device: Any,
    perf: harness.PerfTracker,
    scoring: bool,
) -> tuple[float, int, int]:
    """One pass over the batches, each forward a step of ``perf`` (whose window the caller
    opens and closes); (NLL sum, tokens scored, last words right) when scoring."""
    nll = scored = right = 0
    for group in groups:
        batch = {k: v.to(device.torch_device) for k, v in collate(group, pad_id).items()}
        real = int(batch["attention_mask"].sum())
        perf.step_begin()
        with torch.inference_mode(), device.autocast():
            logits = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits
        perf.step_end(len(group), real, batch["input_ids"].numel())
        if scoring:
            s = score(logits, batch)
            nll, scored, right = nll + s[0], scored + s[1], right + s[2]
    return nll, scored, right


def rates(tot: harness.PerfTotals) -> tuple[float | None, float | None]:
    """(real tokens / pass wall time, real tokens / forward time) of the counted forwards."""
    whole = tot.tokens / tot.whole_time if tot.whole_time > 0 and tot.tokens else None
    core = tot.tokens / tot.compute_time if tot.compute_time > 0 and tot.tokens else None
    return whole, core


def main(args: argparse.Namespace, env: harness.DistEnv, events: harness.EventWriter) -> int:
    config = harness.load_config(args.config)
    hp = config["hp"]
    missing = [k for k in HP_KEYS if k not in hp]
    if missing:
        raise harness.InputError(f"{args.config}: hp lacks {', '.join(missing)}")
    if env.world_size != env.local_world_size:
        raise harness.InputError(
            f"{args.config}: tensor parallelism spans one node; got {env.world_size} processes "
            f"over nodes of {env.local_world_size}"
        )
    harness.require_paths(args.data_dir, (CHECKPOINT, TOKENIZER, DATA))
    precision = str(config.get("precision") or hp.get("precision") or "fp32")
    if precision not in aquila_model.DTYPES:
        raise harness.InputError(f"precision {precision!r}: this case runs fp32, fp16 or bf16")
    device = harness.open_device(str(config.get("vendor", "cpu")), precision, env.local_rank)
    harness.init_distributed(env, device)
    tp = env.world_size
    say = print if env.is_global_zero else (lambda *a, **k: None)
    events.emit("start", world_size=tp, case=CASE, precision=precision)
    say(f"{CASE}: tensor parallel {tp}, device {device.name}, precision {precision}", flush=True)

    data = Path(args.data_dir)
    max_len = int(hp["max_seq_length"])
    try:
        tok = load_tokenizer(data / TOKENIZER)
        texts = read_lambada(data / DATA)[: int(hp["max_texts"]) or None]
        model = aquila_model.load(data / CHECKPOINT, precision, tp, device.torch_device)
    except (DataError, ValueError) as e:
        raise harness.InputError(str(e)) from None
    cfg = model.config
    if tok.get_vocab_size() > cfg.vocab_size:
        raise harness.InputError(
            f"{data / TOKENIZER}: {tok.get_vocab_size()} tokens, the model has {cfg.vocab_size}"
        )
    examples = encode(tok, texts, max_len)
    groups = batches(examples, int(hp["eval_batch_size"]))
    pad_id = tok.token_to_id("<|endoftext|>") or 0  # padding is masked: any id works
    n_params = harness.non_embedding_params(model)  # DTensor numel() is the global size
    mean_len = sum(len(g) * max(len(e.ids) for e in g) for g in groups) / len(examples)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    per_token = harness.inference_flops_per_token(
        n_params, cfg.num_hidden_layers, cfg.num_attention_heads, head_dim, round(mean_len)
    )
    say(
        f"model: {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, "
        f"{cfg.num_attention_heads} heads / {cfg.num_key_value_heads} groups, {n_params} "
        f"non-embedding params; {len(examples)} texts in {len(groups)} batches",
        flush=True,
    )
    memory = harness.MemoryMonitor(device)
    warmup = int(hp["warmup_steps"])

    memory.sample()
    val = harness.PerfTracker(warmup, device.synchronize, harness.barrier)
    val.train_begin()
    nll, scored, right = run_pass(model, groups, pad_id, device, val, scoring=True)
    val.train_end()
    loss, acc = nll / scored, right / len(examples)
    events.emit("eval", name="acc", value=acc, samples=len(examples))
    say(f"validation: loss {loss:.4f}, last-word acc {acc:.4f}", flush=True)
    memory.sample()

    infer = harness.PerfTracker(warmup, device.synchronize, harness.barrier)
    infer.train_begin()
    for n in range(int(hp["infer_passes"])):
        run_pass(model, groups, pad_id, device, infer, scoring=False)
        memory.sample()
        used, total = memory.peak_gib()
        tot = infer.totals()
        events.emit(
            "step",
            step=int(tot.steps),
            samples=len(examples) * (n + 1),
            tokens=int(sum(len(e.ids) for e in examples) * (n + 1)),
            loss=loss,
            lr=0.0,
            throughput=tot.samples / tot.whole_time if tot.whole_time > 0 else 0.0,
            mem_used_gib=used,
            mem_total_gib=total,
        )
    infer.train_end()
    val_tot, infer_tot = val.totals(), infer.totals()
    p_val_whole, p_val_core = rates(val_tot)
    p_infer_whole, p_infer_core = rates(infer_tot)
    totals = harness.reduce_totals(infer_tot)
    mem = harness.reduce_memory(*memory.peak_gib())
    harness.shutdown_distributed()
    if env.is_global_zero:
        payload = harness.build_result(
            totals=totals,
            world_size=tp,
            device=device,
            chip=config.get("chip"),
            flops=harness.ModelFlops(
                per_token,
                formula=f"inference 2N+4LHQT, N={n_params} without embeddings, "
                f"T={round(mean_len)} the mean padded length",
            ),
            memory=mem,
            metrics={
                "acc": acc,
                "loss": loss,
                "p_val_whole": p_val_whole,
                "p_val_core": p_val_core,
                "p_infer_whole": p_infer_whole,
                "p_infer_core": p_infer_core,
            },
            converged=True,
            notes=[
                "acc: LAMBADA last-word accuracy (every token of the last word greedy-right)",
                "loss: mean negative log-likelihood per token over the whole set",
                f"p_val_*, p_infer_*: real tokens per second of the whole tensor-parallel "
                f"group of {tp}; the first {warmup} forwards of each pass left out",
            ],
            training=False,
            peak_cache=harness.peak_cache_path(Path(args.data_dir).parent),
        )
        events.emit("result", **payload)
        say(f"result: loss {loss:.4f} acc {acc:.4f} p_infer_core {p_infer_core}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(harness.run_workload("aquila_33b-inference workload", main))
