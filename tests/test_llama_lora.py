"""cases/llama2_7b_finetune-pytorch: prepare, LoRA training, the MMLU scorer, the whole case.

The tiny synthetic Llama (2 layers, width 64) stands in for Llama-2-7B: the code paths are
the real ones (save_pretrained / from_pretrained, peft, MMLU CSVs, fleetperf --batch).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import REPO, Fleetperf
from llm_cases import CASES, LORA, case_module, events, prepare, resolved_config, run_workload
from seed_records import llama_finetune

from tui import catalog


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lora") / LORA
    proc = prepare(LORA, "--synthetic", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def mmlu():
    return case_module(LORA, "mmlu")


@pytest.fixture(scope="module")
def tokenizer(data_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(data_dir / "llama2_7b_hf")


def test_synthetic_layout_loads_as_the_real_one(data_dir: Path, tokenizer, mmlu) -> None:
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(data_dir / "llama2_7b_hf")
    assert model.config.model_type == "llama" and len(tokenizer) <= model.config.vocab_size
    records = json.loads((data_dir / "samsum" / "train.json").read_text())
    assert len(records) >= 1000 and {"id", "dialogue", "summary"} <= set(records[0])
    root = data_dir / "mmlu"
    assert mmlu.subjects(root) == ["abstract_algebra", "opposites"]  # the seed's subject first
    rows = list(csv.reader((root / "test" / "abstract_algebra_test.csv").open()))
    assert all(len(r) == 6 and r[5] in "ABCD" for r in rows)
    # Llama's convention: each answer letter after "Answer:" is one token, "▁A".."▁D"
    ids = mmlu.letter_ids(tokenizer)
    assert tokenizer.convert_ids_to_tokens(ids) == ["▁A", "▁B", "▁C", "▁D"]
    assert tokenizer("Answer: C")["input_ids"][-1] == ids[2]


def test_prepare_from_checks_and_stages(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "staged"
    proc = prepare(LORA, "--from", str(data_dir), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    for rel in ("llama2_7b_hf/model.safetensors", "samsum/train.json", "mmlu/dev"):
        assert (out / rel).exists(), rel
    assert (out / "samsum/train.json").read_bytes() == (data_dir / "samsum/train.json").read_bytes()


@pytest.mark.parametrize(
    ("breakage", "named"),
    [
        ("rm mmlu/dev/opposites_dev.csv", "mmlu/dev/opposites_dev.csv"),
        ("rm llama2_7b_hf/model.safetensors", "llama2_7b_hf/model.safetensors"),
        ("bad samsum/train.json", "samsum/train.json: record 1"),
        ("bad mmlu/test/abstract_algebra_test.csv", "mmlu/test/abstract_algebra_test.csv: row 1"),
    ],
)
def test_prepare_from_names_the_first_bad_file(
    data_dir: Path, tmp_path: Path, breakage: str, named: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(data_dir, src)
    action, rel = breakage.split()
    if action == "rm":
        (src / rel).unlink()
    elif rel.endswith(".json"):
        (src / rel).write_text(json.dumps([{"dialogue": "a: hi", "summary": "x"}, {"id": "2"}]))
    else:
        (src / rel).write_text("question,only two\n")
    out = tmp_path / "out"
    proc = prepare(LORA, "--from", str(src), "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and str(src / named) in proc.stderr, proc.stderr
    assert not out.exists()  # nothing staged


def test_lora_trains_only_the_adapters(data_dir: Path, tokenizer) -> None:
    import harness

    run, samsum = case_module(LORA, "run"), case_module(LORA, "samsum")
    device = harness.open_device("cpu", "fp32")
    torch.manual_seed(0)
    model = run.lora_model(data_dir / "llama2_7b_hf", device)
    lora = model.peft_config["default"]
    assert (lora.r, lora.lora_alpha, lora.lora_dropout) == (8, 32, 0.05)
    assert set(lora.target_modules) == {"q_proj", "v_proj"} and lora.task_type == "CAUSAL_LM"
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    c = model.config  # r x (in + out) per adapted projection, q and v in every layer
    assert sum(p.numel() for p in trainable.values()) == c.num_hidden_layers * 2 * 8 * 2 * 64
    _, n_lora = run.model_flops(model, 512)
    assert n_lora == sum(p.numel() for p in trainable.values())
    base = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    adapters = {n: p.detach().clone() for n, p in trainable.items()}

    blocks = samsum.pack(samsum.read_records(data_dir / "samsum/train.json"), tokenizer, 64)
    optimizer = torch.optim.AdamW(trainable.values(), lr=0.01)
    losses = []
    model.train()
    for step in range(30):
        batch = blocks[(step % 8) * 4 : (step % 8) * 4 + 4]
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.1, losses
    for name, before in base.items():
        assert torch.equal(dict(model.named_parameters())[name], before), name
    changed = [n for n, p in trainable.items() if not torch.equal(p, adapters[n])]
    assert len(changed) == len(trainable)


def test_packing_cuts_exact_blocks(data_dir: Path, tokenizer) -> None:
    samsum = case_module(LORA, "samsum")
    records = samsum.read_records(data_dir / "samsum/train.json")[:50]
    blocks = samsum.pack(records, tokenizer, 64)
    texts = [samsum.PROMPT.format(**r, eos=tokenizer.eos_token) for r in records]
    flat = [i for ids in tokenizer(texts)["input_ids"] for i in ids]
    assert blocks.shape == (len(flat) // 64, 64)
    assert blocks.flatten().tolist() == flat[: blocks.numel()]
    assert (blocks == tokenizer.eos_token_id).sum() >= 40  # the prompts' ends survive packing


def _write_subject(root: Path, subject: str, dev: list[list[str]], test: list[list[str]]) -> None:
    for split, rows in (("dev", dev), ("test", test)):
        (root / split).mkdir(parents=True, exist_ok=True)
        with open(root / split / f"{subject}_{split}.csv", "w", newline="") as f:
            csv.writer(f).writerows(rows)


class PrefersOneLetter(torch.nn.Module):
    """Known logits: the same next-token scores whatever the prompt, the highest on a token
    that is no answer letter, then on ``letter``."""

    def __init__(self, vocab: int, favourite: int, distractor: int) -> None:
        super().__init__()
        scores = torch.zeros(vocab)
        scores[favourite], scores[distractor] = 2.0, 5.0
        self.register_buffer("scores", scores)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.scores.expand(ids.shape[0], ids.shape[1], -1)


def test_mmlu_scorer_against_known_logits(tmp_path: Path, tokenizer, mmlu) -> None:
    shots = [[f"Shot {i}?", "w", "x", "y", "z", "ABCD"[i % 4]] for i in range(5)]
    # by hand: a model that always says C gets 2 of 4 history and 1 of 3 maths questions right
    history = [["Who?", "a", "b", "c", "d", x] for x in "CCAB"]
    maths = [["2+2?", "1", "2", "4", "5", x] for x in "CDD"]
    root = tmp_path / "mmlu"
    _write_subject(root, "world_history", shots, history)
    _write_subject(root, "high_school_mathematics", shots, maths)
    names = mmlu.subjects(root)
    items = mmlu.build_items(root, names, tokenizer, 5, 4096)
    assert [i.shots for i in items] == [5] * 7
    letters = mmlu.letter_ids(tokenizer)
    distractor = tokenizer("Answer:")["input_ids"][-1]
    model = PrefersOneLetter(len(tokenizer), letters[2], distractor)
    per = mmlu.score(model, items, letters, "letters")
    assert per["world_history"] == {"correct": 2, "total": 4, "acc": 0.5}
    assert per["high_school_mathematics"] == {"correct": 1, "total": 3, "acc": 1 / 3}
    assert mmlu.overall(per) == pytest.approx(3 / 7)
    # FlagPerf's rule: the argmax over the whole vocabulary is the distractor, never a letter
    per = mmlu.score(model, items, letters, "vocab")
    assert mmlu.overall(per) == 0.0
    # where the vocabulary's argmax is a letter (A over C), both rules pick it: 1 of 7
    says_a = PrefersOneLetter(len(tokenizer), letters[2], letters[0])
    for rule in mmlu.SCORING:
        per = mmlu.score(says_a, items, letters, rule)
        assert (per["world_history"]["correct"], per["high_school_mathematics"]["correct"]) == (
            1,
            0,
        )


def test_mmlu_prompt_is_the_standard_one(mmlu) -> None:
    q = mmlu.Question("What is 1+1?", ("1", "2", "3", "4"), 1)
    shot = mmlu.Question("What is 2+2?", ("4", "5", "6", "7"), 0)
    assert mmlu.prompt("high_school_mathematics", [shot], q) == (
        # two spaces before the subject, as Hendrycks' and FlagPerf's format_subject write it
        "The following are multiple choice questions (with answers) about  high school "
        "mathematics.\n\n"
        "What is 2+2?\nA. 4\nB. 5\nC. 6\nD. 7\nAnswer: A\n\n"
        "What is 1+1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer:"
    )


def test_mmlu_drops_the_first_shots_to_fit(tmp_path: Path, tokenizer, mmlu) -> None:
    shots = [[f"Shot number {i} " * 10, "w", "x", "y", "z", "A"] for i in range(5)]
    _write_subject(tmp_path, "long", shots, [["Short?", "a", "b", "c", "d", "B"]])
    full = mmlu.build_items(tmp_path, ["long"], tokenizer, 5, 4096)[0]
    fit = mmlu.build_items(tmp_path, ["long"], tokenizer, 5, len(full.input_ids) - 1)[0]
    assert fit.shots == 4 and len(fit.input_ids) < len(full.input_ids)
    assert tokenizer.decode(fit.input_ids).count("Shot number 0") == 0  # the first one went


def test_missing_data_is_named_before_any_training(tmp_path: Path, data_dir: Path) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(data_dir, partial)
    shutil.rmtree(partial / "mmlu" / "dev")
    config = resolved_config(LORA, "cpu/CPUx1x1", tmp_path / "run")
    proc = run_workload(LORA, config, partial, timeout=300)
    assert proc.returncode == 2
    assert str(partial / "mmlu" / "dev") in proc.stderr
    (error,) = events(config.parent)
    assert error["kind"] == "error"


@pytest.mark.slow
def test_fleetperf_batch_on_cpu(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "res")
    out = fp.run("prepare", LORA, "--synthetic")
    assert out.returncode == 0, out.stderr
    out = fp.batch(LORA, "cpu/CPUx1x1", args=("--format", "json"), timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout[out.stdout.index("\n[") :])
    assert rec["status"] == "passed" and rec["config"] == "CPUx1x1"
    metrics = rec["metrics"]
    assert 0.0 <= metrics["acc"] <= 1.0
    for key in ("tokens_per_s_per_device", "loss", "mem_used_gib", "p_core"):
        assert isinstance(metrics[key], float) and metrics[key] > 0, key
    assert metrics["mfu"] is None  # no datasheet peak for a CPU
    assert metrics["lora_params"] == 4096  # the case's own metric (case.yaml)
    assert any(n.startswith("LoRA (seed's LoraConfig): 4096 trainable") for n in rec["notes"])
    received = events(fp.results / "runs" / rec["run_id"] / "hosts" / "localhost")
    result = next(e for e in received if e["kind"] == "result")
    assert set(result["mmlu_subjects"]) == {"abstract_algebra"}  # the seed's subject and rule
    assert any(
        "mmlu_subjects=abstract_algebra" in n and "mmlu_scoring=vocab" in n for n in rec["notes"]
    )
    steps = [e for e in received if e["kind"] == "step"]
    assert steps[-1]["samples"] == 60 and steps[-1]["tokens"] == 60 * 512


def test_mmlu_gold_token_is_flagperfs(tokenizer, mmlu) -> None:
    # FlagPerf's evaluator compares the argmax with tokenizer([label]).input_ids[0][1]: the
    # token of the bare letter after BOS, the same token as the letter after "Answer:".
    letters = mmlu.letter_ids(tokenizer)
    assert [tokenizer([x])["input_ids"][0][1] for x in mmlu.LETTERS] == letters


def test_mmlu_defaults_score_as_the_seed() -> None:
    spec = catalog.load_case(LORA, CASES)
    assert spec.defaults["mmlu_subjects"] == "abstract_algebra"
    assert spec.defaults["mmlu_scoring"] == "vocab"


def test_catalog_refuses_choices_without_the_default(tmp_path: Path) -> None:
    shutil.copytree(CASES / LORA, tmp_path / LORA)
    declared = tmp_path / LORA / "case.yaml"
    text = declared.read_text().replace("[vocab, letters]", "[letters]")
    declared.write_text(text)
    with pytest.raises(catalog.CatalogError, match="choices.mmlu_scoring: its default 'vocab'"):
        catalog.load_case(LORA, tmp_path)


def test_bad_mmlu_subjects_refused_before_training(tmp_path: Path, data_dir: Path) -> None:
    config = resolved_config(
        LORA, "cpu/CPUx1x1", tmp_path / "run", mmlu_subjects="abstract_algebra,virology"
    )
    proc = run_workload(LORA, config, data_dir, timeout=300)
    assert proc.returncode == 2 and "no subject 'virology'" in proc.stderr, proc.stderr
    assert [e["kind"] for e in events(config.parent)] == ["start", "error"]  # no step


def test_mmlu_scoring_choices_checked_by_catalog_and_workload(
    tmp_path: Path, data_dir: Path, mmlu
) -> None:
    # one list of rules: case.yaml's choices are mmlu.py's SCORING
    assert catalog.load_case(LORA, CASES).choices["mmlu_scoring"] == list(mmlu.SCORING)
    expected = "mmlu_scoring: expected one of vocab, letters (got 'top1')"
    with pytest.raises(catalog.CatalogError) as refused:  # before a launch
        resolved_config(LORA, "cpu/CPUx1x1", tmp_path / "set", mmlu_scoring="top1")
    assert str(refused.value) == f"--set: {expected}"
    config = resolved_config(LORA, "cpu/CPUx1x1", tmp_path / "run")
    written = json.loads(config.read_text())  # a config.json the catalog did not write
    written["hp"]["mmlu_scoring"] = "top1"
    config.write_text(json.dumps(written))
    proc = run_workload(LORA, config, data_dir, timeout=300)
    assert proc.returncode == 2 and f"{config}: hp.{expected}" in proc.stderr, proc.stderr
    assert [e["kind"] for e in events(config.parent)] == ["error"]  # refused before start


def test_half_precision_is_autocast_over_fp32_weights(data_dir: Path) -> None:
    # FlagPerf's fp16 row: fp32 weights, torch autocast and a GradScaler (the harness's
    # device gives both); on CPU the same holds for bf16, the half type a CPU runs.
    import harness

    run = case_module(LORA, "run")
    device = harness.open_device("cpu", "bf16")
    model = run.lora_model(data_dir / "llama2_7b_hf", device)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    ids = torch.tensor([[1, 5, 6, 7]])
    with device.autocast():
        assert model(input_ids=ids).logits.dtype == torch.bfloat16


def test_the_003_table_shows_the_precision_in_fix_hp() -> None:
    from tui.tables import to_markdown

    spec = catalog.load_case(LORA, CASES)
    a100 = catalog.load_config(spec, "nvidia/A100x1x1")
    row2 = catalog.resolve(spec, a100, {"precision": "fp16", "train_batch_size": 4})
    assert row2.seed_fix_hp == {"precision": "fp16", "train_batch_size": 4}
    record = llama_finetune("l2", row2.seed_fix_hp, {"tokens_per_s_per_device": 4017})
    record = record.model_copy(update={"short_names": spec.short_names})
    assert "| A100单机单卡（1x1） | 数据精度=fp16,local_batchsize=4 | 4017 |" in to_markdown(
        [record]
    )
    # run settings (budget, logging) stay out of the seed's column
    cpu = catalog.resolve(spec, catalog.load_config(spec, "cpu/CPUx1x1"))
    assert cpu.seed_fix_hp == {"learning_rate": 0.003}


def test_a100_row_named_after_the_fp32_row_runs_tf32() -> None:
    from harness.vendors import precision_problem

    spec = catalog.load_case(LORA, CASES)
    row1 = catalog.resolve(spec, catalog.load_config(spec, "nvidia/A100x1x1"))
    assert row1.precision == "tf32" and precision_problem("nvidia", "tf32") is None
    strict = catalog.resolve(
        spec, catalog.load_config(spec, "nvidia/A100x1x1"), {"precision": "fp32"}
    )
    assert strict.precision == "fp32"  # strict FP32 stays one --set away
