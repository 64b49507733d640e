"""The llm-serving case without vLLM: its load generator's client against a real HTTP
server of this test that streams server-sent events at known times, the metric definitions
against numpy and vLLM's formulas (cases/llm-serving/serving_metrics.py), and prepare."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections.abc import AsyncIterator

import numpy as np
import pytest
from aiohttp import web
from conftest import REPO

sys.path.insert(0, str(REPO / "cases" / "llm-serving"))
import loadgen  # noqa: E402
import serving_metrics  # noqa: E402

GAP_S = 0.05


async def completions(request: web.Request) -> web.StreamResponse:
    """A streamed completion of max_tokens chunks GAP_S apart, then usage and [DONE]."""
    body = await request.json()
    if body["model"] != "m":
        return web.Response(status=404, reason="no such model")
    answer = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await answer.prepare(request)
    await answer.write(b": ping\n\n")
    for i in range(body["max_tokens"]):
        await asyncio.sleep(GAP_S)
        await answer.write(f"data: {json.dumps({'choices': [{'text': f' w{i}'}]})}\n\n".encode())
    usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": body["max_tokens"]}
    await answer.write(
        f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode()
    )
    return answer


async def serve() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - the bound port
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def test_the_client_times_each_chunk_and_reads_the_usage() -> None:
    async def go() -> tuple[list[loadgen.Outcome], float]:
        gen = serve()
        url = await anext(gen)
        try:
            plan = [loadgen.Request([5, 6, 7], 4), loadgen.Request([5], 1)]
            return await loadgen.run_load(url, "m", plan, [0.0, 0.0], 2, 30)
        finally:
            await gen.aclose()

    (four, one), wall = asyncio.run(go())
    assert four.ok and one.ok
    assert (four.prompt_len, four.output_len, one.output_len) == (3, 4, 1)
    assert len(four.itl) == 3 and one.itl == []
    assert all(GAP_S * 0.8 <= gap < GAP_S * 4 for gap in four.itl)
    assert four.ttft >= GAP_S * 0.8
    assert four.latency == pytest.approx(four.ttft + sum(four.itl), abs=1e-6)
    assert wall >= four.latency


def test_an_http_error_is_a_failed_request() -> None:
    async def go() -> list[loadgen.Outcome]:
        gen = serve()
        url = await anext(gen)
        try:
            return (await loadgen.run_load(url, "other", [loadgen.Request([1], 2)], [0.0], 1, 30))[
                0
            ]
        finally:
            await gen.aclose()

    (bad,) = asyncio.run(go())
    assert not bad.ok and bad.error == "HTTP 404 no such model"


def test_percentiles_are_numpys() -> None:
    rng = random.Random(3)
    for n in (1, 2, 7, 100):
        xs = [rng.random() for _ in range(n)]
        for q in (50, 90, 99):
            assert serving_metrics.percentile(xs, q) == pytest.approx(np.percentile(xs, q))


def test_metrics_follow_vllm_bench_serves_definitions() -> None:
    a = loadgen.Outcome(True, 10, 5, ttft=0.1, latency=0.5, itl=[0.1] * 4)
    b = loadgen.Outcome(True, 20, 1, ttft=0.3, latency=0.3)  # one token: TPOT 0 for goodput
    c = loadgen.Outcome(error="HTTP 500")
    m = serving_metrics.metrics([a, b, c], duration_s=2.0, slo_ttft_ms=200, slo_tpot_ms=150)
    assert m["tpot_mean_ms"] == pytest.approx(100)  # (0.5 - 0.1) / (5 - 1); b has none
    assert m["ttft_mean_ms"] == pytest.approx(200) and m["e2el_p50_ms"] == pytest.approx(400)
    assert m["itl_p99_ms"] == pytest.approx(100)
    assert m["request_throughput"] == 1.0 and m["output_tokens_per_s"] == 3.0
    assert m["total_tokens_per_s"] == 18.0
    assert m["goodput"] == 0.5  # a only: b's TTFT is past 200 ms
    assert (m["completed_requests"], m["failed_requests"]) == (2.0, 1.0)


def test_arrivals_and_lengths_as_vllms_random_load() -> None:
    times = loadgen.send_times(200, rate=4.0, burstiness=0.5, seed=1)
    assert times == sorted(times) and times[-1] == pytest.approx(200 / 4.0)
    assert loadgen.send_times(3, 0.0, 1.0, 1) == [0.0, 0.0, 0.0]
    plan = loadgen.requests(300, 32, 16, 0.5, [7, 8], seed=2)
    assert {len(r.prompt) for r in plan} <= set(range(16, 49))
    assert {r.max_tokens for r in plan} == set(range(8, 25))
    assert plan == loadgen.requests(300, 32, 16, 0.5, [7, 8], seed=2)


def test_prepare_writes_a_model_folder_in_the_real_formats(tmp_path) -> None:
    """``prepare --synthetic``: safetensors, tokenizer.json and config.json as
    save_pretrained writes them, a word-level tokenizer (a word, a token); ``--from`` a
    folder without them: one line naming the file, exit 2."""
    from conftest import Fleetperf
    from transformers import AutoConfig, AutoTokenizer

    fp = Fleetperf(REPO / "cases", tmp_path / "data", tmp_path / "results")
    out = fp.run("prepare", "llm-serving", "--synthetic")
    assert out.returncode == 0, out.stderr
    model = tmp_path / "data" / "llm-serving" / "model"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in model.iterdir()
    }
    cfg = AutoConfig.from_pretrained(model)
    assert (cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size) == ("llama", 2, 128)
    tok = AutoTokenizer.from_pretrained(model)
    ids = tok("the dog ran home", add_special_tokens=False).input_ids
    assert len(ids) == 4 and ids[3] == tok.unk_token_id  # "home" is no word of it
    assert tok.decode(ids[:3]) == "the dog ran"

    (tmp_path / "empty").mkdir()
    out = fp.run("prepare", "llm-serving", "--from", str(tmp_path / "empty"))
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: missing data: {tmp_path / 'empty' / 'config.json'}"
