"""generate-ttft and generate-throughput: FlagPerf's generate tasks (harness/generate.py).

Unit tests of what must match FlagPerf's code (the prompt template, the CSV as pandas reads
it, the token counts, ROUGE, the "Throughput" formula), fast tests of prepare, and each
engine end to end through ``fleetperf --batch`` on the synthetic data: hf on transformers in
.venv, vllm on an offline vllm.LLM in .venv-vllm (skipped where .venv-vllm is absent, as
tests/cases/test_llm_serving.py; about 1.5 minutes a run on 2 cores, most of it vLLM's start).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf
from process_guard import descendants
from vllm_engine import needs_vllm, prepared

sys.path.insert(0, str(REPO / "cases"))

from harness import generate  # noqa: E402
from harness.errors import InputError  # noqa: E402

PROMPTS = 4
ROUGES = ("rouge1", "rouge2", "rouge_l", "rouge_lsum")


def test_the_prompt_is_flagperfs_template() -> None:
    # generate/TTFT/nvidia/vllm/ttft.py (and the three other scripts):
    #     "Please generate a summary about it:" + str(i) +
    #     "Please generate a summary after the article content is finished."
    assert generate.prompt("#Person1#: Hi.") == (
        "Please generate a summary about it:#Person1#: Hi."
        "Please generate a summary after the article content is finished."
    )


def test_the_csv_reads_as_pandas_reads_it(tmp_path: Path) -> None:
    """``pd.read_csv(path)["dialogue"].tolist()[0:task_nums]``: an empty cell and pandas'
    NA strings are NaN (not str, so FlagPerf skips the row); quoted commas and newlines stay."""
    path = tmp_path / "Xsum.csv"
    path.write_text(
        'id,dialogue,summary\n0,"a, b\nc",s0\n1,,s1\n2,NA,s2\n3,n/a b,\n4,d,s4\n5,e,s5\n'
    )
    tasks, answers = generate.read_xsum(path, 5)
    assert tasks == ["a, b\nc", None, None, "n/a b", "d"]
    assert answers == ["s0", "s1", "s2", None, "s4"]
    (tmp_path / "bad.csv").write_text("id,text\n0,x\n")
    with pytest.raises(InputError, match=r"bad\.csv: no column dialogue, summary"):
        generate.read_xsum(tmp_path / "bad.csv", 1)


def test_rouge_is_flagperfs_mean_fmeasure() -> None:
    from rouge_score import rouge_scorer

    # throughput.py: rouge_scorer.RougeScorer(['rouge1', 'rouge2', 'rougeL', "rougeLsum"],
    # use_stemmer=True); scores = scorer.score(answers_all[i], gentext[i]); mean fmeasure
    answers = ["the cats were running home", "a dog sat"]
    texts = ["the cat runs home", "nothing alike"]
    got = generate.rouge(answers, texts)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], True)
    want = [scorer.score(a, t) for a, t in zip(answers, texts, strict=True)]
    assert got["rouge1"] == pytest.approx((want[0]["rouge1"].fmeasure + 0) / 2)
    assert got["rouge1"] > 0.5 / 2  # stemmed: cats~cat, running~runs
    assert got["rouge_l"] == pytest.approx(want[0]["rougeL"].fmeasure / 2)
    assert got["rouge2"] == pytest.approx(want[0]["rouge2"].fmeasure / 2)


def test_vllm_tokens_are_counted_as_flagperf_counts_them() -> None:
    # throughput.py (vllm): new_generate += float(len(output.outputs[0].token_ids))
    #                       origin_gen += float(len(output.prompt_token_ids))
    #                       genersum = origin_gen + new_generate; token/s = genersum/duration
    one = {
        "duration_s": 2.0,
        "outputs": [
            {"text": "a b", "tokens": 16, "prompt_tokens": 40},
            {"text": "c", "tokens": 3, "prompt_tokens": 25},  # ended at EOS: 3 counted
        ],
    }
    got = generate.counted(one)
    assert (got.prompt_tokens, got.new_tokens, got.texts) == (65, 19, ["a b", "c"])
    assert got.duration_s == 2.0


def test_throughput_is_result_shows_formula() -> None:
    # utils/result_show.py: if duration > ttft: throughput = newly_tokens / (duration - ttft)
    #                       else: throughput = newly_tokens / (duration)
    assert generate.new_tokens_per_s(160, 10.0, 2.0) == 20.0
    assert generate.new_tokens_per_s(160, 2.0, 3.0) == 80.0


@pytest.fixture(scope="module")
def fp(tmp_path_factory: pytest.TempPathFactory) -> Fleetperf:
    runner = prepared(tmp_path_factory, "generate", "generate-ttft")
    out = runner.run("prepare", "generate-throughput", "--synthetic")
    assert out.returncode == 0, out.stderr
    return runner


def _run(fp: Fleetperf, case: str, config: str) -> dict:
    out = fp.batch(case, config, f"task_nums={PROMPTS}", args=("--format", "json"), timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout)
    assert rec["status"] == "passed", rec
    return rec["metrics"]


def _sane_throughput(m: dict, first: str, other: str) -> None:
    assert m["prompts"] == PROMPTS and m[other] is None
    assert 0 < m[first] < 600 and 0 < m["generate_s"] < 600
    assert m["total_tokens"] > m["new_tokens"] > 0
    assert m["total_tokens_per_s"] == pytest.approx(m["total_tokens"] / m["generate_s"])
    # result_show.py's two branches: on vllm the TTFT pass, the engine's first, can take
    # longer than the 16-token pass after it (seen with 4 and 8 prompts)
    span = m["generate_s"] - m[first] if m["generate_s"] > m[first] else m["generate_s"]
    assert m["new_tokens_per_s"] == pytest.approx(m["new_tokens"] / span)
    for name in ROUGES:
        assert 0 <= m[name] <= 1, (name, m[name])
    assert m["rouge1"] >= m["rouge2"]
    assert m["rouge1"] > 0  # the synthetic model's words are the summaries' words


@pytest.mark.slow
def test_hf_ttft_end_to_end(fp: Fleetperf) -> None:
    m = _run(fp, "generate-ttft", "cpu/CPUx1x1")
    assert m["prompts"] == PROMPTS and m["batch_first_token_s"] is None
    assert 0 < m["first_token_mean_s"] < 60
    assert m["mem_used_gib"] > 0


@pytest.mark.slow
def test_hf_throughput_end_to_end_counts_tokens_as_flagperf(fp: Fleetperf) -> None:
    """throughput.py (hf): ``origin_len += len(inputs.input_ids[i])`` and ``new_len += 16``
    per prompt, whatever generate returned (EOS may end it early)."""
    from transformers import AutoTokenizer

    m = _run(fp, "generate-throughput", "cpu/CPUx1x1")
    _sane_throughput(m, "first_token_mean_s", "batch_first_token_s")
    data = fp.data_root / "generate-throughput"
    tasks, _ = generate.read_xsum(data / generate.CSV_NAME, PROMPTS)
    tok = AutoTokenizer.from_pretrained(data / generate.MODEL)
    prompt_tokens = sum(len(tok([generate.prompt(t)]).input_ids[0]) for t in tasks if t)
    assert m["new_tokens"] == PROMPTS * 16
    assert m["total_tokens"] == prompt_tokens + PROMPTS * 16


@pytest.mark.slow
@needs_vllm
@pytest.mark.xdist_group("llm_serving")
def test_vllm_ttft_end_to_end(fp: Fleetperf) -> None:
    m = _run(fp, "generate-ttft", "cpu/CPUx1x1-vllm")
    assert m["prompts"] == PROMPTS and m["first_token_mean_s"] is None
    assert 0 < m["batch_first_token_s"] < 60
    assert m["mem_used_gib"] > 1  # vLLM's processes (a 1 GiB KV cache), not the workload's


@pytest.mark.slow
@needs_vllm
@pytest.mark.xdist_group("llm_serving")
def test_vllm_throughput_end_to_end(fp: Fleetperf) -> None:
    m = _run(fp, "generate-throughput", "cpu/CPUx1x1-vllm")
    _sane_throughput(m, "batch_first_token_s", "first_token_mean_s")
    assert m["new_tokens"] <= PROMPTS * 16  # the outputs' token ids: EOS may end one early


@pytest.mark.slow
@needs_vllm
@pytest.mark.xdist_group("llm_serving")
@pytest.mark.parametrize("stop", ["workload-sigkill", "controller-ctrl-c"])
def test_a_stopped_run_takes_its_vllm_engine_along(fp: Fleetperf, stop: str) -> None:
    """The run stopped while vLLM runs, its engine core up: SIGKILL to the workload (no
    handler sees it: generate_vllm.py's parent-death signal), or Ctrl-C at the controller
    (the executor's SIGTERM to the workload and its descendants). Either way generate_vllm.py
    stops its process group, so no vLLM process is left within 30 s. Before the group stop,
    the workload killed outright left vLLM's engine core and worker running."""
    before = set(fp.host_dirs())
    proc = fp.popen("--batch", "--case", "generate-ttft", "--config", "cpu/CPUx1x1-vllm")
    try:
        deadline = time.monotonic() + 600
        while not (new := set(fp.host_dirs()) - before):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(1)
        (run_dir,) = new
        while not (found := ENGINE_PID.search(_read(run_dir / "stdout.log"))):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(1)
        engine = int(found.group(1))
        # vLLM's engine core process started (its log lines say "(EngineCore pid=N)")
        while "(EngineCore" not in _read(run_dir / "engine.log"):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(1)
        family = {engine, *descendants(engine)}
        if stop == "workload-sigkill":
            os.kill(parent_of(engine), signal.SIGKILL)
        else:
            proc.send_signal(signal.SIGINT)
        stopped = time.monotonic() + 30
        while alive(family) and time.monotonic() < stopped:
            time.sleep(0.5)
        assert not alive(family)
        assert proc.wait(120) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if stop == "controller-ctrl-c":
        assert fp.records()[-1]["status"] == "aborted"


ENGINE_PID = re.compile(r"vLLM offline engine pid (\d+):")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def alive(pids: set[int]) -> bool:
    """Any of ``pids`` running (a zombie has ended)."""
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if state != "Z":
            return True
    return False


def test_prepare_from_a_folder_without_the_csv_says_so(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "model").mkdir(parents=True)
    runner = Fleetperf(REPO / "cases", tmp_path / "data", tmp_path / "results")
    out = runner.run("prepare", "generate-ttft", "--from", str(src))
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: missing data: {src / 'Xsum.csv'}"
    assert not (tmp_path / "data" / "generate-ttft" / "Xsum.csv").exists()


def test_prepare_from_a_folder_links_the_csv_and_the_model(fp: Fleetperf, tmp_path: Path) -> None:
    """--from DIR: DIR/Xsum.csv and DIR/model/ (here the synthetic ones, as an operator's
    folder), hard-linked into the data directory, the manifest naming the source."""
    made = fp.data_root / "generate-ttft"
    src = tmp_path / "xsum"
    (src / "model").mkdir(parents=True)
    (src / "Xsum.csv").write_bytes((made / "Xsum.csv").read_bytes())
    for f in (made / "model").iterdir():
        (src / "model" / f.name).write_bytes(f.read_bytes())
    runner = Fleetperf(REPO / "cases", tmp_path / "data", tmp_path / "results")
    out = runner.run("prepare", "generate-throughput", "--from", str(src))
    assert out.returncode == 0, out.stderr
    staged = tmp_path / "data" / "generate-throughput"
    assert (staged / "Xsum.csv").stat().st_ino == (src / "Xsum.csv").stat().st_ino
    names = {f.name for f in (src / "model").iterdir()}
    assert {f.name for f in (staged / "model").iterdir()} == names
    manifest = json.loads((staged / "fleetperf-data.json").read_text())
    assert manifest["synthetic"] is False and manifest["source"] == str(src)


@pytest.mark.slow
def test_a_missing_engine_interpreter_fails_the_run_in_one_line(fp: Fleetperf) -> None:
    """engine vllm without its interpreter on the host: the run fails at start naming
    config.json's hp.engine_python and the path, before any engine starts."""
    out = fp.batch(
        "generate-ttft",
        "cpu/CPUx1x1-vllm",
        "engine_python=/nonexistent/python",
        args=("--format", "json"),
        timeout=300,
    )
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout)
    assert rec["status"] == "failed"
    assert "hp.engine_python: /nonexistent/python is no interpreter on this host" in rec["error"]
