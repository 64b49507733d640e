"""llama2_7b-deepspeed: Llama-2-7B pre-training from random weights, DeepSpeed ZeRO-3 (FlagPerf).

    PYTHONPATH=<repo>/cases python -m torch.distributed.run ... cases/llama2_7b-deepspeed/run.py \
        --config RUN_DIR/config.json --data-dir DATA_DIR --run-dir RUN_DIR

Follows docs/workload-contract.md; the harness's ``Run`` (docs/harness.md) does the rest, and
DeepSpeed joins the process group it opened with the device layer's backend. The model is
LlamaForCausalLM of the shape in DATA_DIR/llama2_7b_hf/config.json, initialised at random
inside ``deepspeed.zero.Init`` so that no rank ever holds the whole model; ZeRO stage 3 shards
parameters, gradients and optimizer state over all ranks; activations are checkpointed where
hp gradient_checkpointing says (FlagPerf's R300 row), attention is eager or torch's SDPA as
hp flashattn says. The DeepSpeed config is built from the resolved hp (ds_config.py) and kept
in RUN_DIR/ds_config.json.

Data: the flat token array DATA_DIR/openwebtext_llama2_100M.npy (preprocess.py) cut into
sequences of max_seq_length, shuffled and split over the ranks as FlagPerf's
DistributedSampler (hp seed 0, its default); training runs hp epochs passes (FlagPerf: 1), or
stops early at hp max_tokens over all ranks where that is not 0.

Rates and MFU come from the harness's timers: tokens_per_s_per_device is all ranks' tokens /
training time / world size, and MFU counts 6N + 12LHQT per token (attention included)
against the peak of the math that ran (fp16/bf16). FlagPerf's own figures come beside them
(flagperf_figures.py): loss_flagperf, tokens_per_s_flagperf and mfu_flagperf, computed as its
run_pretraining.py at 43625f67 computes them; the seed's references judge those.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from functools import partial
from typing import Any

import ds_config
import harness
import torch
from flagperf_figures import FlagPerfFigures
from openwebtext import MODEL_DIR, TOKENS, load_tokens, sequences


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


def main(run: harness.Run) -> None:
    hp, device = run.hp, run.device
    bs, seq = hp.train_batch_size, hp.max_seq_length
    if run.precision == "tf32":
        raise harness.InputError(
            f"{run.config_path}: precision tf32: DeepSpeed runs fp32, fp16, bf16"
        )
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = LlamaConfig.from_pretrained(
        run.data / MODEL_DIR,
        use_cache=False,  # training
        # FlagPerf's flashattn (FlashAttention-2 in transformers 4.34); torch's SDPA runs its
        # flash kernel for this causal, unpadded fp16/bf16 attention. False: eager, as 4.32.1
        attn_implementation="sdpa" if hp.flashattn else "eager",
    )
    if seq > shape.max_position_embeddings:
        raise harness.InputError(
            f"{run.config_path}: max_seq_length {seq} exceeds the model's "
            f"max_position_embeddings {shape.max_position_embeddings}"
        )
    tokens = load_tokens(run.data / TOKENS, shape.vocab_size)
    loader = run.train_loader(
        range(len(tokens) // seq),
        bs,
        partial(sequences, tokens=tokens, seq=seq),
        source=f"{run.data / TOKENS} in sequences of {seq}",
    )

    # DeepSpeed compiles some ops on first use (on CPU its shared-memory collectives): the
    # build is cached with the host's fleetperf data, not in the user's home directory.
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(run.data.parent / ".torch_extensions"))
    import deepspeed

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    deepspeed.init_distributed(dist_backend=device.backend)  # joins the harness's group
    world = run.env.world_size
    ds = ds_config.build(hp, run.precision, world)
    if run.env.is_global_zero:
        (run.run_dir / "ds_config.json").write_text(json.dumps(ds, indent=1))
    with deepspeed.zero.Init(config_dict_or_path=ds):  # on the current device
        model = LlamaForCausalLM(shape)  # random weights, partitioned as they are created
    if hp.gradient_checkpointing:  # transformers 4.32.1's default: reentrant checkpoints
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    engine, _, _, _ = deepspeed.initialize(
        model=model, config=ds, model_parameters=model.parameters()
    )
    shards, whole = shard_sizes(engine.module)
    flops = model_flops(shape, seq)
    run.say(f"model: {flops.formula}; ZeRO-3 shards {shards} of {whole} elements")

    engine.train()
    flagperf = FlagPerfFigures()
    for batch in run.train(loader, lr=lambda: engine.get_lr()[0], epochs=int(hp.epochs)):
        index = run.steps % len(loader)  # the step's index in its epoch
        input_ids = batch.to(device.torch_device, non_blocking=True)
        with run.step(bs, input_ids.numel(), input_ids.numel()) as step:  # flat text: no pad
            step.loss = engine(input_ids=input_ids, labels=input_ids).loss
            engine.backward(step.loss)
            engine.step()
        flagperf.step_loss(index, float(step.loss))
        flagperf.read_timer(engine.tput_timer, engine.steps_per_print())

    notes = [
        f"ZeRO-3: rank r holds shards[r] of {whole} parameter elements: {shards}",
        f"DeepSpeed config from hp (ds_config.json in the run dir): micro batch {bs}, "
        f"gradient accumulation {hp.gradient_accumulation_steps}, world {world}",
        "no loss target (seed: a throughput case): passed = the epochs (or hp max_tokens "
        "where set) trained to a finite loss",
        "random initial weights (the seed's setting); sequences are cut from a flat token "
        "array: every token is real",
    ]
    if run.precision in ("fp16", "amp"):
        notes.append("fp16 with dynamic loss scaling: steps skipped on overflow are counted")
    notes.append(
        "loss_flagperf, tokens_per_s_flagperf, mfu_flagperf: FlagPerf's definitions (rank 0's "
        "last printed 10-step loss; DeepSpeed's running rate at the last steps_per_print step "
        "/ nproc x nnodes, nnodes^2 times the per-device rate; 7e9 x 6 FLOPs a token over "
        "theory_flops); the seed's references judge these"
    )
    nproc = run.env.local_world_size
    figures = flagperf.metrics(seq, bs, nproc, world // nproc, float(hp.theory_flops))
    # beyond the contract's fields: parameter elements held per rank, and the whole model's
    run.finish(
        flops,
        metrics=figures,
        notes=notes,
        extra={"zero3": {"shards": shards, "elements": whole}},
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
