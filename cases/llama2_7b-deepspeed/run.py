"""llama2_7b-deepspeed: Llama-2-7B pre-training from random weights, DeepSpeed ZeRO-3 (FlagPerf).

    PYTHONPATH=<repo>/cases python -m torch.distributed.run ... cases/llama2_7b-deepspeed/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

Follows docs/workload-contract.md (torchrun sets the ranks; DeepSpeed joins the process group
the harness opened with the device layer's backend). The model is LlamaForCausalLM of the
shape in DATA_DIR/llama2_7b_hf/config.json, initialised at random inside
``deepspeed.zero.Init`` so that no rank ever holds the whole model; ZeRO stage 3 shards
parameters, gradients and optimizer state over all ranks; activations are checkpointed. The
DeepSpeed config is built from the resolved hp (ds_config.py) and kept in
RUN_DIR/ds_config.json.

Data: the flat token array DATA_DIR/openwebtext_llama2_100M.npy (preprocess.py) cut into
sequences of max_seq_length; a DistributedSampler over the global rank splits them; training
stops after max_tokens tokens over all ranks or at the end of the array.

Rates and MFU come from the harness's timers (not DeepSpeed's log): tokens_per_s_per_device
is all ranks' tokens / training time / world size, and MFU counts 6N + 12LHQT per token
(attention included) against the peak of the math that ran (fp16/bf16).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

import ds_config
import harness
import numpy as np
import torch
from openwebtext import MODEL_DIR, TOKENS, load_tokens
from torch.utils.data import DataLoader, DistributedSampler

CASE = "llama2_7b-deepspeed"
HP_KEYS = (
    "train_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "weight_decay",
    "max_seq_length",
    "max_tokens",
    "log_every_steps",
    "warmup_steps",
    "seed",
)
SYS_EVERY_S = 10.0


def check_hp(path: Path, hp: dict[str, Any]) -> None:
    missing = [k for k in HP_KEYS if k not in hp]
    if missing:
        raise harness.InputError(f"{path}: hp lacks {', '.join(missing)}")
    positive = (
        "train_batch_size",
        "gradient_accumulation_steps",
        "max_seq_length",
        "max_tokens",
        "log_every_steps",
    )
    bad = [k for k in positive if int(hp[k]) <= 0]
    if bad:
        raise harness.InputError(f"{path}: hp {', '.join(bad)} must be positive")


def model_flops(config: Any, seq_len: int) -> harness.ModelFlops:
    """6N + 12LHQT per token, N counted on a meta-device copy (ZeRO-3 leaves no full weights)."""
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        n = harness.non_embedding_params(LlamaForCausalLM(config))
    c = config
    head_dim = c.hidden_size // c.num_attention_heads
    per_token = harness.training_flops_per_token(
        n, c.num_hidden_layers, c.num_attention_heads, head_dim, seq_len
    )
    return harness.ModelFlops(per_token, 0.0, f"6N+12LHQT, N={n} without embeddings, T={seq_len}")


def shard_sizes(model: Any) -> tuple[list[int], int]:
    """(parameter elements each rank holds, elements of the whole model) under ZeRO-3."""
    import torch.distributed as dist

    local = sum(p.ds_tensor.numel() for p in model.parameters())
    whole = sum(p.ds_numel for p in model.parameters())
    shards: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(shards, local)
    return shards, whole


def main(args: argparse.Namespace, env: harness.DistEnv, events: harness.EventWriter) -> int:
    config = harness.load_config(args.config)
    hp = config["hp"]
    check_hp(args.config, hp)
    data = Path(args.data_dir)
    harness.require_paths(data, (f"{MODEL_DIR}/config.json", TOKENS))
    if not config.get("vendor"):
        raise harness.InputError(f"{args.config}: no 'vendor'")
    precision = str(config.get("precision") or hp.get("precision") or "fp16")
    if precision == "tf32":
        raise harness.InputError(f"{args.config}: precision tf32: DeepSpeed runs fp32, fp16, bf16")
    world, bs, seq = env.world_size, int(hp["train_batch_size"]), int(hp["max_seq_length"])
    say = print if env.is_global_zero else (lambda *a, **k: None)

    from transformers import LlamaConfig, LlamaForCausalLM

    shape = LlamaConfig.from_pretrained(data / MODEL_DIR, use_cache=False)  # checkpointing
    if seq > shape.max_position_embeddings:
        raise harness.InputError(
            f"{args.config}: max_seq_length {seq} exceeds the model's "
            f"max_position_embeddings {shape.max_position_embeddings}"
        )
    tokens = load_tokens(data / TOKENS, shape.vocab_size)
    n_seq = len(tokens) // seq
    if n_seq < bs * world:
        raise harness.InputError(f"{data / TOKENS}: fewer than {bs * world} sequences of {seq}")

    device = harness.open_device(str(config["vendor"]), precision, env.local_rank)
    harness.init_distributed(env, device)
    # DeepSpeed compiles some ops on first use (on CPU its shared-memory collectives): the
    # build is cached with the host's fleetperf data, not in the user's home directory.
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(data.parent / ".torch_extensions"))
    import deepspeed

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    deepspeed.init_distributed(dist_backend=device.backend)  # joins the harness's group
    events.emit("start", world_size=world, case=CASE, precision=precision)
    say(f"{CASE}: world_size {world}, device {device.name}, precision {precision}", flush=True)
    torch.manual_seed(int(hp["seed"]))

    ds = ds_config.build(hp, precision, world)
    if env.is_global_zero:
        (Path(args.run_dir) / "ds_config.json").write_text(json.dumps(ds, indent=1))
    with deepspeed.zero.Init(config_dict_or_path=ds):  # on the current device
        model = LlamaForCausalLM(shape)  # random weights, partitioned as they are created
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    engine, _, _, _ = deepspeed.initialize(
        model=model, config=ds, model_parameters=model.parameters()
    )
    shards, whole = shard_sizes(engine.module)
    flops = model_flops(shape, seq)
    say(f"model: {flops.formula}; ZeRO-3 shards {shards} of {whole} elements", flush=True)

    sampler = DistributedSampler(  # the global rank: FlagPerf passed the local one
        range(n_seq), num_replicas=world, rank=env.rank, shuffle=True, seed=int(hp["seed"])
    )
    loader = DataLoader(
        range(n_seq),
        batch_size=bs,
        sampler=sampler,
        drop_last=True,
        pin_memory=False,
        collate_fn=lambda idx: torch.from_numpy(
            np.stack([tokens[i * seq : (i + 1) * seq] for i in idx]).astype(np.int64)
        ),
    )
    perf = harness.PerfTracker(int(hp["warmup_steps"]), device.synchronize, harness.barrier)
    memory = harness.MemoryMonitor(device)
    sysmon = harness.SysSampler(device, min_interval_s=SYS_EVERY_S)
    max_tokens, log_every = int(hp["max_tokens"]), int(hp["log_every_steps"])

    step = samples = 0
    win_loss, win_steps, win_samples, last_loss = 0.0, 0, 0, math.nan
    win_t0 = perf.clock()
    engine.train()
    perf.train_begin()
    for batch in loader:  # one pass over the array at most
        input_ids = batch.to(device.torch_device, non_blocking=True)
        perf.step_begin()
        loss = engine(input_ids=input_ids, labels=input_ids).loss
        engine.backward(loss)
        engine.step()
        perf.step_end(bs, input_ids.numel(), input_ids.numel())  # flat text: no padding
        step, samples = step + 1, samples + bs * world
        win_loss += loss.item()
        win_steps += 1
        win_samples += bs * world
        done = samples * seq >= max_tokens
        if step % log_every == 0 or done:
            loss_sum, loss_n = harness.all_reduce([win_loss, win_steps])
            last_loss = loss_sum / loss_n
            now = perf.clock()
            memory.sample()
            used, total = memory.peak_gib()
            events.emit(
                "step",
                step=step,
                samples=samples,
                tokens=samples * seq,
                loss=last_loss,
                lr=engine.get_lr()[0],
                throughput=win_samples / (now - win_t0),
                mem_used_gib=used,
                mem_total_gib=total,
            )
            say(f"step {step} samples {samples} loss {last_loss:.4f}", flush=True)
            if sysmon.due():
                events.emit("sys", **sysmon.sample())
            win_loss, win_steps, win_samples, win_t0 = 0.0, 0, 0, perf.clock()
        if done:
            break
    perf.train_end()

    totals = harness.reduce_totals(perf.totals())
    mem = harness.reduce_memory(*memory.peak_gib())
    harness.shutdown_distributed()
    if not env.is_global_zero:
        return 0
    finite = math.isfinite(last_loss)
    notes = [
        f"ZeRO-3: rank r holds shards[r] of {whole} parameter elements: {shards}",
        f"DeepSpeed config from hp (ds_config.json in the run dir): micro batch {bs}, "
        f"gradient accumulation {hp['gradient_accumulation_steps']}, world {world}",
        "no loss target (seed: a throughput case): passed = the token budget trained to a "
        "finite loss",
        "random initial weights (the seed's setting); sequences are cut from a flat token "
        "array: every token is real",
    ]
    if precision in ("fp16", "amp"):
        notes.append("fp16 with dynamic loss scaling: steps skipped on overflow are counted")
    result = harness.build_result(
        totals=totals,
        world_size=world,
        device=device,
        chip=config.get("chip"),
        flops=flops,
        memory=mem,
        metrics={"loss": last_loss if finite else None},
        converged=finite,
        message=None if finite else f"training loss is {last_loss}",
        notes=notes,
        peak_cache=harness.peak_cache_path(data.parent),
    )
    # beyond the contract's fields: parameter elements held per rank, and the whole model's
    result["zero3"] = {"shards": shards, "elements": whole}
    events.emit("result", **result)
    shown = ", ".join(f"{k}={v:.4g}" for k, v in result["metrics"].items() if v is not None)
    say(f"result {result['status']}: {shown}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(harness.run_workload("llama2_7b-deepspeed workload", main))
