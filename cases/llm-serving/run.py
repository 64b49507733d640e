"""llm-serving: an inference server on the host under a load of streamed completions.

    PYTHONPATH=<repo>/cases python cases/llm-serving/run.py --config RUN_DIR/config.json \
        --data-dir DATA_DIR --run-dir RUN_DIR

Follows docs/workload-contract.md (docs/cases/serving.md says what is measured). The
workload starts vLLM's OpenAI-compatible server on a free port of 127.0.0.1 with the engine's
own interpreter (hp ``engine_python``: .venv-vllm on a cpu host, made by scripts/bootstrap) in
a process group of its own, waits for /health, sends ``warmup_requests`` and then
``num_prompts`` timed ones (loadgen.py: at most ``concurrency`` in flight, released all at
once or at ``request_rate`` in gamma arrivals), and always stops the server
(engine_server.py), also on the executor's SIGTERM. Metrics as ``vllm bench serve`` defines
them (serving_metrics.py). The run passes when every timed request was answered.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import engine_server
import harness
import loadgen
import serving_metrics

REPO = Path(__file__).resolve().parents[2]
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def prompt_ids(model: Path) -> list[int]:
    """The ids a random prompt draws from: the model's vocabulary less the tokenizer's
    special tokens (tokenizer.json's added tokens)."""
    try:
        vocab = int(json.loads((model / "config.json").read_text())["vocab_size"])
        added = json.loads((model / "tokenizer.json").read_text()).get("added_tokens", [])
        special = {int(t["id"]) for t in added}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise harness.InputError(f"{model}: cannot read its vocabulary: {e}") from None
    ids = [i for i in range(vocab) if i not in special]
    if not ids:
        raise harness.InputError(f"{model / 'config.json'}: no vocabulary left for prompts")
    return ids


def main(run: harness.Run) -> None:
    hp = run.hp
    engine_server.stop_on_sigterm()
    python = engine_server.engine_python(hp.engine_python, REPO, run.config_path)
    if run.precision not in DTYPES:
        raise harness.InputError(f"precision {run.precision!r}: this case serves fp32, bf16, fp16")
    model = run.data / "model"
    ids = prompt_ids(model)
    warm = loadgen.requests(hp.warmup_requests, hp.input_len, hp.output_len, 0.0, ids, hp.seed + 7)
    plan = loadgen.requests(
        hp.num_prompts, hp.input_len, hp.output_len, hp.range_ratio, ids, hp.seed
    )
    times = loadgen.send_times(hp.num_prompts, hp.request_rate, hp.burstiness, hp.seed)
    longest = max(len(r.prompt) + r.max_tokens for r in plan)
    if longest > hp.max_model_len:
        raise harness.InputError(
            f"{run.config_path}: a request of {longest} tokens (input_len, output_len, "
            f"range_ratio) does not fit max_model_len {hp.max_model_len}"
        )

    def progress(done: list[loadgen.Outcome]) -> None:
        run.memory.sample()  # the workload and its descendants: the server's processes
        ok = [o for o in done if o.ok]
        run.events.emit(
            "step", step=len(done), samples=len(ok), tokens=sum(o.output_len for o in ok)
        )

    with engine_server.serving(
        python,
        model,
        dtype=DTYPES[run.precision],
        max_model_len=hp.max_model_len,
        kv_cache_gib=hp.kv_cache_gib,
        startup_timeout_s=hp.startup_timeout_s,
        log=run.run_dir / "server.log",
        say=run.say,
    ) as engine:
        if warm:
            asyncio.run(
                loadgen.run_load(
                    engine.url,
                    engine.model,
                    warm,
                    [0.0] * len(warm),
                    hp.concurrency,
                    hp.request_timeout_s,
                )
            )
        rate = (
            f"{hp.request_rate} requests/s (burstiness {hp.burstiness})"
            if hp.request_rate
            else "all at once"
        )
        run.say(f"{hp.num_prompts} requests, at most {hp.concurrency} in flight, released {rate}")
        outcomes, duration = asyncio.run(
            loadgen.run_load(
                engine.url,
                engine.model,
                plan,
                times,
                hp.concurrency,
                hp.request_timeout_s,
                progress,
            )
        )
        progress(outcomes)  # the last step record and memory reading, the server still up
    metrics = serving_metrics.metrics(outcomes, duration, hp.slo_ttft_ms, hp.slo_tpot_ms)
    failed = [o for o in outcomes if not o.ok]
    message = (
        f"{len(failed)} of {len(outcomes)} requests failed: {failed[0].error}" if failed else None
    )
    run.finish(
        harness.ModelFlops(0.0, formula="not counted: the server's work is not timed here"),
        metrics=metrics,
        converged=not failed,
        message=message,
        notes=[
            f"vLLM OpenAI-compatible server, {DTYPES[run.precision]}, max_model_len "
            f"{hp.max_model_len}; {hp.num_prompts} requests of ~{hp.input_len} prompt + "
            f"~{hp.output_len} output tokens (range ratio {hp.range_ratio}), concurrency "
            f"{hp.concurrency}, released {rate}; {hp.warmup_requests} warm-up requests left out",
            f"wall time {duration:.2f} s; goodput: TTFT <= {hp.slo_ttft_ms} ms and TPOT <= "
            f"{hp.slo_tpot_ms} ms; definitions as vllm bench serve's (docs/cases/serving.md)",
            "p_infer_*, mfu: not measured (the server computes; the workload times requests)",
        ],
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
