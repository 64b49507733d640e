"""FlagPerf's two ``generate`` tasks, as its code runs them: the workload of the cases
generate-ttft and generate-throughput (docs/cases/generate.md), shared by both.

FlagPerf's files (HEAD 1b5a0303 of FlagOpen/FlagPerf): ``generate/TTFT/nvidia/{hf,vllm}/
ttft.py``, ``generate/Throughput/nvidia/{hf,vllm}/throughput.py`` and ``generate/utils/
result_show.py`` (the "Throughput" column). Each function below cites the lines it follows.

Two engines: ``hf`` runs transformers' ``generate`` in this process, one prompt at a time,
as FlagPerf's hf scripts; ``vllm`` runs one offline ``vllm.LLM`` in the engine's own
interpreter (hp ``engine_python``, .venv-vllm: vLLM's pins are not the workloads'), a child
process running ``generate_vllm.py``, which times each ``LLM.generate`` and writes JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.engine import engine_python
from harness.errors import InputError
from harness.result import ModelFlops
from harness.staging import link_or_copy, prepare_main
from harness.tiny import STORY_WORDS, save_word_llama

if TYPE_CHECKING:
    from harness.runner import Run

# generate/TTFT/nvidia/vllm/ttft.py and the three others, word for word:
#     "Please generate a summary about it:" + str(i) +
#     "Please generate a summary after the article content is finished."
BEFORE = "Please generate a summary about it:"
AFTER = "Please generate a summary after the article content is finished."
# rouge_scorer.RougeScorer(['rouge1', 'rouge2', 'rougeL', "rougeLsum"], use_stemmer=True);
# the metrics' names (lower case, as the registry's rule) beside each
ROUGE_TYPES = {
    "rouge1": "rouge1",
    "rouge2": "rouge2",
    "rougeL": "rouge_l",
    "rougeLsum": "rouge_lsum",
}
CSV_NAME = "Xsum.csv"  # host.yaml's data_path: "/Xsum.csv"
MODEL = "model"
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
# pandas.read_csv's default na_values (pandas/_libs/parsers.pyx, STR_NA_VALUES): a cell that
# is exactly one of these is NaN, a float, which FlagPerf's ``type(i) == str`` then skips.
NA_VALUES = frozenset(
    (
        "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
        "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
    )
)  # fmt: skip
VLLM_SCRIPT = Path(__file__).with_name("generate_vllm.py")


def prompt(dialogue: str) -> str:
    return BEFORE + dialogue + AFTER


def read_xsum(path: Path, task_nums: int) -> tuple[list[str | None], list[str | None]]:
    """The first ``task_nums`` rows' ``dialogue`` and ``summary`` as FlagPerf reads them
    (``pd.read_csv(data_path)["dialogue"].tolist()[0:task_nums]``): None where pandas reads
    NaN. InputError naming the file when it cannot be read or lacks a column."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = csv.DictReader(f)
            missing = {"dialogue", "summary"} - set(rows.fieldnames or ())
            if missing:
                raise InputError(f"{path}: no column {', '.join(sorted(missing))}")
            picked = [row for _, row in zip(range(task_nums), rows, strict=False)]
    except FileNotFoundError:
        raise InputError(f"missing data: {path}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{path}: cannot read it: {e}") from None

    def cell(v: str | None) -> str | None:
        return None if v is None or v in NA_VALUES else v

    return [cell(r["dialogue"]) for r in picked], [cell(r["summary"]) for r in picked]


def rouge(answers: Sequence[str], predictions: Sequence[str]) -> dict[str, float]:
    """Mean F-measure of each ROUGE type over the pairs, by metric name, as FlagPerf's
    throughput scripts: ``scores = scorer.score(answers_all[i], gentext[i])``, ``rouge1 +=
    scores['rouge1'].fmeasure``, then ``rouge1/len(gentext)``."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    sums = dict.fromkeys(ROUGE_TYPES, 0.0)
    for answer, predicted in zip(answers, predictions, strict=True):
        scores = scorer.score(answer, predicted)
        for t in ROUGE_TYPES:
            sums[t] += scores[t].fmeasure
    return {ROUGE_TYPES[t]: s / len(predictions) for t, s in sums.items()}


def new_tokens_per_s(new_tokens: float, duration_s: float, ttft_s: float) -> float:
    """FlagPerf's "Throughput" (result_show.py): ``newly_tokens / (duration - ttft)`` if
    ``duration > ttft`` else ``newly_tokens / duration``, ttft being the TTFT task's figure."""
    return new_tokens / (duration_s - ttft_s if duration_s > ttft_s else duration_s)


@dataclass
class Generated:
    """One timed pass of FlagPerf's throughput task."""

    duration_s: float  # the timed generate calls, summed (hf) or the one call (vllm)
    prompt_tokens: int  # FlagPerf's origin_len / origin_gen
    new_tokens: int  # FlagPerf's new_len / new_generate, counted as it counts them
    texts: list[str]  # what ROUGE scores


def counted(vllm_pass: dict[str, Any]) -> Generated:
    """A vLLM pass (generate_vllm.py's JSON) counted as generate/Throughput/nvidia/vllm/
    throughput.py counts it: ``new_generate += float(len(output.outputs[0].token_ids))``,
    ``origin_gen += float(len(output.prompt_token_ids))``, ``gentext.append(output.outputs[0].
    text)``."""
    outs = vllm_pass["outputs"]
    return Generated(
        vllm_pass["duration_s"],
        sum(o["prompt_tokens"] for o in outs),
        sum(o["tokens"] for o in outs),
        [o["text"] for o in outs],
    )


class HfEngine:
    """transformers in this process, as generate/*/nvidia/hf/*.py: the tokenizer's pad token
    its EOS, ``AutoModelForCausalLM.from_pretrained(...).eval()``, one prompt a generate."""

    def __init__(self, run: Run, model: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.run = run
        self.device = run.device
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = getattr(torch, DTYPES[run.precision])
        loaded = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
        self.model = loaded.to(self.device.torch_device).eval()
        self.calls = 0  # generate calls so far, both passes: the step records' count

    def _generate(self, text: str, max_new_tokens: int, padding: bool) -> tuple[float, Any]:
        """One timed generate: tokenising outside the timer, ``torch.cuda.synchronize()``
        inside, as FlagPerf's ``start = time.perf_counter()`` ... ``end``; then a step
        record (the live view's progress)."""
        import torch

        inputs = self.tokenizer([text], return_tensors="pt", padding=padding)
        inputs = inputs.to(self.device.torch_device)
        with torch.no_grad():
            start = time.perf_counter()
            outputs = self.model.generate(
                inputs.input_ids,
                max_new_tokens=max_new_tokens,
                num_return_sequences=1,
                early_stopping=False,
                attention_mask=inputs.attention_mask,
            )
            self.device.synchronize()
            took = time.perf_counter() - start
        self.calls += 1
        self.run.events.emit("step", step=self.calls, samples=self.calls)
        return took, (inputs, outputs)

    def first_token(self, tasks: Sequence[str | None]) -> float:
        """generate/TTFT/nvidia/hf/ttft.py: each str dialogue alone through ``generate``
        with ``max_new_tokens=1``, the times summed, then ``TTFT: {duration/len(tasks)}``:
        divided by every row taken, skipped ones included."""
        duration = 0.0
        for text in tasks:
            if text is None:  # `if type(input_text) != str: continue`
                continue
            took, _ = self._generate(prompt(text), 1, padding=False)
            duration += took
        return duration / len(tasks)

    def throughput(self, prompts: Sequence[str], max_tokens: int) -> Generated:
        """generate/Throughput/nvidia/hf/throughput.py: each prompt alone, ``max_new_tokens=
        16``; ``origin_len += len(inputs.input_ids[i])``, ``new_len += 16`` (16 whether or
        not generation stopped early at EOS), and ROUGE scores ``tokenizer.decode(outputs[i]
        [len(outputs[i]) - 16::], skip_special_tokens=True)``: the last 16 ids."""
        out = Generated(0.0, 0, 0, [])
        for text in prompts:
            took, (inputs, outputs) = self._generate(text, max_tokens, padding=True)
            out.duration_s += took
            for j in range(len(outputs)):
                out.prompt_tokens += len(inputs.input_ids[j])
                out.new_tokens += max_tokens
                tail = outputs[j][len(outputs[j]) - max_tokens :]
                out.texts.append(self.tokenizer.decode(tail, skip_special_tokens=True))
        return out


def vllm_passes(run: Run, model: Path, prompts: Sequence[str], max_tokens: Sequence[int]) -> list:
    """One ``vllm.LLM`` in the engine's interpreter, then one timed ``LLM.generate(prompts,
    SamplingParams(max_tokens=n))`` per n, in order (generate_vllm.py). Returns its passes:
    ``{"duration_s", "outputs": [{"text", "tokens", "prompt_tokens"}]}``. The child's output
    goes to RUN_DIR/engine.log; its memory is sampled while it runs."""
    hp = run.hp
    python = engine_python(hp.engine_python, run.config_path)
    request = run.run_dir / "engine-request.json"
    answer = run.run_dir / "engine-result.json"
    request.write_text(
        json.dumps(
            {
                "model": str(model),
                "dtype": DTYPES[run.precision],
                "prompts": list(prompts),
                "max_tokens": list(max_tokens),
                "max_model_len": hp.max_model_len or None,
                "seed": hp.seed,
                "synchronize": run.device.type != "cpu",
            }
        )
    )
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(hp.kv_cache_gib)}
    log = run.run_dir / "engine.log"
    argv = [str(python), str(VLLM_SCRIPT), str(os.getpid()), str(request), str(answer)]
    with log.open("wb") as out:
        # a group of its own: generate_vllm.py and the processes vLLM starts, stopped together
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            start_new_session=True,
        )
        run.say(
            f"vLLM offline engine pid {child.pid}: {python} {VLLM_SCRIPT.name} (log {log.name})"
        )
        try:
            while child.poll() is None:
                run.memory.sample()  # the workload and its descendants: vLLM's processes
                time.sleep(1)
        finally:
            if child.poll() is None:  # the workload is leaving on an exception
                child.terminate()  # generate_vllm.py stops its group
                child.wait(30)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)  # whatever of the group is left
    if child.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(f"the vLLM engine exited with {child.returncode}: {' | '.join(tail)}")
    return json.loads(answer.read_text())["passes"]


def _data(run: Run) -> tuple[Path, list[str | None], list[str | None]]:
    if run.precision not in DTYPES:
        raise InputError(f"precision {run.precision!r}: this case runs fp32, bf16, fp16")
    tasks, answers = read_xsum(run.data / CSV_NAME, run.hp.task_nums)
    if not any(t is not None for t in tasks):
        raise InputError(f"{run.data / CSV_NAME}: no dialogue in its first rows")
    return run.data / MODEL, tasks, answers


def first_token_metrics(engine: str, value: float) -> dict[str, float | None]:
    """hf's figure is a mean per prompt, vllm's one batch's wall time: two names."""
    return {
        "first_token_mean_s": value if engine == "hf" else None,
        "batch_first_token_s": value if engine == "vllm" else None,
    }


FIRST_TOKEN_NOTE = {
    "hf": 'first_token_mean_s is FlagPerf\'s hf "TTFT": each prompt alone through generate '
    "(max_new_tokens=1), the times summed and divided by the rows taken",
    "vllm": 'batch_first_token_s is FlagPerf\'s vllm "TTFT": the wall time of one '
    "LLM.generate of every prompt at once with max_tokens=1 (the last prompt's first token)",
}


def _finish(run: Run, metrics: dict[str, float | None], notes: list[str]) -> None:
    run.memory.sample()
    run.finish(
        ModelFlops(0.0, formula="not counted: FlagPerf's MFU needs the model's parameters"),
        metrics=metrics,
        converged=True,
        notes=[*notes, "p_infer_*, mfu: not measured (the timed calls are the engine's)"],
    )


def ttft_main(run: Run) -> None:
    """generate-ttft: FlagPerf's TTFT task on hp ``engine``."""
    model, tasks, _ = _data(run)
    engine = run.hp.engine
    prompts = [prompt(t) for t in tasks if t is not None]
    if engine == "hf":
        value = HfEngine(run, model).first_token(tasks)
    else:
        (one,) = vllm_passes(run, model, prompts, [1])
        value = one["duration_s"]
    run.say(f"{engine}: {len(prompts)} prompts, FlagPerf's TTFT {value:.4f} s")
    _finish(
        run,
        {**first_token_metrics(engine, value), "prompts": float(len(prompts))},
        [FIRST_TOKEN_NOTE[engine], f"{len(prompts)} of the first {len(tasks)} rows had a dialogue"],
    )


def throughput_main(run: Run) -> None:
    """generate-throughput: FlagPerf's main.py runs ttft.py, then throughput.py, then
    result_show; here one engine load runs both tasks in that order."""
    model, tasks, answers = _data(run)
    engine, max_tokens = run.hp.engine, run.hp.max_tokens
    prompts = [prompt(t) for t in tasks if t is not None]
    # throughput.py: answers_all = [answers[i] for i in range(len(tasks)) if type(tasks[i]) == str]
    kept = [a for t, a in zip(tasks, answers, strict=True) if t is not None]
    if any(a is None for a in kept):
        raise InputError(f"{run.data / CSV_NAME}: a row with a dialogue has no summary to score")
    if engine == "hf":
        hf = HfEngine(run, model)
        ttft = hf.first_token(tasks)
        got = hf.throughput(prompts, max_tokens)
    else:
        first, passed = vllm_passes(run, model, prompts, [1, max_tokens])
        ttft = first["duration_s"]
        got = counted(passed)
    scores = rouge(kept, got.texts)
    total = got.prompt_tokens + got.new_tokens
    run.say(f"{engine}: {len(prompts)} prompts, {total} tokens in {got.duration_s:.3f} s")
    _finish(
        run,
        {
            **first_token_metrics(engine, ttft),
            "total_tokens_per_s": total / got.duration_s,
            "new_tokens_per_s": new_tokens_per_s(got.new_tokens, got.duration_s, ttft),
            "generate_s": got.duration_s,
            "new_tokens": float(got.new_tokens),
            "total_tokens": float(total),
            "prompts": float(len(prompts)),
            **scores,
        },
        [
            FIRST_TOKEN_NOTE[engine],
            f"{len(prompts)} prompts, max_tokens {max_tokens}; new_tokens_per_s is FlagPerf's "
            '"Throughput": new tokens / (generate_s - its TTFT)',
        ],
    )


def synthetic_rows(seed: int, rows: int) -> list[tuple[str, str]]:
    """Made-up dialogues and summaries in XSum's CSV shape (id, dialogue, summary)."""
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        dialogue = " ".join(rng.choice(STORY_WORDS) for _ in range(rng.randint(20, 60)))
        summary = " ".join(rng.choice(STORY_WORDS) for _ in range(rng.randint(6, 14)))
        out.append((dialogue, summary))
    return out


REAL_DATA = f"{CSV_NAME} (columns dialogue, summary) and {MODEL}/ (a Hugging Face model)"


def prepare(file: str, doc: str | None) -> int:
    """The generate cases' prepare.py: ``--synthetic`` (``synthetic``) or ``--from DIR``
    (``stage``), as harness.prepare_main runs them."""
    return prepare_main(file, doc, synthetic, stage=stage, real_data=REAL_DATA)


def synthetic(out: Path, args: argparse.Namespace, rows: int = 256) -> None:
    """prepare --synthetic: ``Xsum.csv`` of ``rows`` made-up rows and a tiny word-level
    Llama whose vocabulary holds every whitespace-separated word of the prompts and
    summaries (the template's joins included), so no prompt word is unknown."""
    data = synthetic_rows(args.seed, rows)
    out.mkdir(parents=True, exist_ok=True)
    with (out / CSV_NAME).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "dialogue", "summary"])
        w.writerows((i, d, s) for i, (d, s) in enumerate(data))
    words = dict.fromkeys(w for d, s in data for w in f"{prompt(d)} {s}".split())
    save_word_llama(out / MODEL, sorted(words), args.seed)


def stage(src: Path, out: Path) -> None:
    """prepare --from DIR: DIR/Xsum.csv (XSum as FlagPerf's README converts it: columns dialogue
    and summary) and DIR/model/ (a Hugging Face causal LM folder), both checked, then linked."""
    csv_path, model = src / CSV_NAME, src / MODEL
    read_xsum(csv_path, 1)  # the file and its columns
    config = model / "config.json"
    try:
        json.loads(config.read_text(encoding="utf-8"))["vocab_size"]
    except FileNotFoundError:
        raise InputError(f"missing data: {config}") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{config}: not a model config: {e}") from None
    files = [p for p in model.iterdir() if p.is_file()]
    if not any(p.suffix in (".safetensors", ".bin") for p in files):
        raise InputError(f"{model}: no *.safetensors or *.bin weights")
    link_or_copy(csv_path, out / CSV_NAME)
    for f in files:
        link_or_copy(f, out / MODEL / f.name)
