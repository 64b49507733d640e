"""llm-serving: an inference server on the host under a load of streamed completions.

    PYTHONPATH=<repo>/cases python cases/llm-serving/run.py --config RUN_DIR/config.json \
        --data-dir DATA_DIR --run-dir RUN_DIR

Follows docs/workload-contract.md (docs/cases/serving.md says what is measured). The
workload starts vLLM's OpenAI-compatible server on a free port of 127.0.0.1 with the engine's
own interpreter (hp ``engine_python``: .venv-vllm on a cpu host, made by scripts/bootstrap) in
a process group of its own, waits for /health, sends ``warmup_requests`` and then
``num_prompts`` timed ones (loadgen.py: at most ``concurrency`` in flight, released all at
once or at ``request_rate`` in gamma arrivals), and always stops the server
(engine_server.py), also on the executor's SIGTERM; or loads an existing endpoint. A sweep's
points (sweep.py) share one server. Metrics as ``vllm bench serve`` defines them
(serving_metrics.py); live step records (live.py).
"""

from __future__ import annotations

import asyncio
import sys

import engine_server
import harness
import loadgen
import serving_metrics
import sweep
from live import Live

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def main(run: harness.Run) -> None:
    hp = run.hp
    engine_server.stop_on_sigterm()
    python = engine_server.engine_python(hp.engine_python, run.config_path)
    if run.precision not in DTYPES:
        raise harness.InputError(f"precision {run.precision!r}: this case serves fp32, bf16, fp16")
    key, loads = sweep.swept(hp)
    model = run.data / "model"
    ids = loadgen.prompt_ids(model)
    warm = loadgen.requests(hp.warmup_requests, hp.input_len, hp.output_len, 0.0, ids, hp.seed + 7)
    plan = loadgen.requests(
        hp.num_prompts, hp.input_len, hp.output_len, hp.range_ratio, ids, hp.seed
    )
    loadgen.check_fits(plan, hp.max_model_len, run.config_path)
    live = Live(run)
    points: list[dict] = []  # {"hp": {key: load}, "metrics": {...}} in the order run
    failures: list[str] = []

    def at(load: float) -> tuple[int, float]:
        """(concurrency, request rate) of a point."""
        return (
            int(load) if key == "concurrency" else hp.concurrency,
            load if key == "request_rate" else hp.request_rate,
        )

    def measure(load: float) -> dict:
        concurrency, rate = at(load)
        run.say(
            f"{hp.num_prompts} requests, at most {concurrency} in flight, released "
            f"{loadgen.released(rate, hp.burstiness)}"
        )
        live.start_point()
        times = loadgen.send_times(hp.num_prompts, rate, hp.burstiness, hp.seed)
        outcomes, duration = asyncio.run(
            loadgen.run_load(
                engine.url,
                engine.model,
                plan,
                times,
                concurrency,
                hp.request_timeout_s,
                live.progress,
            )
        )
        live.end_point(outcomes)
        metrics = serving_metrics.metrics(outcomes, duration, hp.slo_ttft_ms, hp.slo_tpot_ms)
        points.append({"hp": {key: load}, "metrics": metrics, "wall_s": round(duration, 3)})
        failed = [o for o in outcomes if not o.ok]
        if failed:
            failures.append(
                f"{key} {load}: {len(failed)} of {len(outcomes)} requests failed: {failed[0].error}"
            )
        return metrics

    answer = None
    with engine_server.endpoint_or_serving(
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
                    at(loads[0])[0],
                    hp.request_timeout_s,
                )
            )
        if hp.find_max_load:
            cap = hp.num_prompts if key == "concurrency" else None  # all in flight at once
            answer = sweep.find_max(
                loads[0],
                lambda load: sweep.meets(measure(load), hp.slo_goodput_ratio),
                hp.max_points,
                cap,
            )
        else:
            for load in loads:
                measure(load)
    best, which = sweep.reported(points, key, hp.slo_goodput_ratio)
    metrics = dict(points[best]["metrics"])
    concurrency, rate = at(points[best]["hp"][key])
    # An existing endpoint (FLEETPERF_SERVING_ENDPOINT) is the operator's server: its engine,
    # dtype and limits are its own, not this run's hp.
    served = (
        f"vLLM OpenAI-compatible server, {DTYPES[run.precision]}, max_model_len {hp.max_model_len}"
        if engine.pid is not None
        else f"an existing endpoint, {engine.url}, model {engine.model} (its own engine)"
    )
    notes = [
        f"{served}; {hp.num_prompts} requests of ~{hp.input_len} prompt + "
        f"~{hp.output_len} output tokens (range ratio {hp.range_ratio}), concurrency "
        f"{concurrency}, released {loadgen.released(rate, hp.burstiness)}; {hp.warmup_requests} "
        "warm-up requests left out",
        f"wall time {points[best]['wall_s']:.2f} s; goodput: TTFT <= {hp.slo_ttft_ms} ms and "
        f"TPOT <= {hp.slo_tpot_ms} ms; definitions as vllm bench serve's "
        "(docs/cases/serving.md)",
        "p_infer_*, mfu: not measured (the server computes; the workload times requests)",
    ]
    if len(points) > 1 or hp.find_max_load:
        shown = ", ".join(str(p["hp"][key]) for p in points)
        notes.append(f"{len(points)} points over {key} in one server run: {shown}; {which}")
    if hp.find_max_load:
        metrics[sweep.ANSWER[key]] = answer
        notes.append(sweep.answer_note(key, loads[0], answer, hp.max_points, hp.slo_goodput_ratio))
    # Under find_max_load a point's failed requests only count against its goodput ratio.
    failed = not hp.find_max_load and failures
    run.finish(
        harness.ModelFlops(0.0, formula="not counted: the server's work is not timed here"),
        metrics=metrics,
        converged=not failed,
        message="; ".join(failures) if failed else None,
        notes=notes,
        extra={"points": points} if len(points) > 1 or hp.find_max_load else None,
    )


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
