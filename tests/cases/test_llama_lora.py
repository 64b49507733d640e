"""cases/llama2_7b_finetune-pytorch: prepare, LoRA training, the MMLU scorer, the whole case.

The tiny synthetic Llama (2 layers, width 64) stands in for Llama-2-7B: the code paths are
the real ones (save_pretrained / from_pretrained, peft, MMLU CSVs, fleetperf --batch).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import REPO, Fleetperf
from llm_cases import CASES, LORA, case_module, events, prepare, resolved_config, run_workload
from seed_records import llama_finetune

from tui.catalog import catalog


# Building it takes seconds (a synthetic model and data set): the tests that use it are slow.
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


@pytest.mark.slow
def test_synthetic_layout_loads_as_the_real_one(data_dir: Path, tokenizer, mmlu) -> None:
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(data_dir / "llama2_7b_hf")
    assert model.config.model_type == "llama" and len(tokenizer) <= model.config.vocab_size
    records = json.loads((data_dir / "samsum_dataset" / "train.json").read_text())
    assert len(records) >= 200 and {"id", "dialogue", "summary"} <= set(records[0])
    root = data_dir / "mmlu_dataset"
    assert mmlu.subjects(root) == ["abstract_algebra", "opposites"]
    rows = list(csv.reader((root / "test" / "abstract_algebra_test.csv").open()))
    assert all(len(r) == 6 and r[5] in "ABCD" for r in rows)
    # Llama's convention: each answer letter after "Answer:" is one token, "▁A".."▁D"
    ids = mmlu.letter_ids(tokenizer)
    assert tokenizer.convert_ids_to_tokens(ids) == ["▁A", "▁B", "▁C", "▁D"]
    assert tokenizer("Answer: C")["input_ids"][-1] == ids[2]


@pytest.mark.slow
def test_prepare_from_checks_and_stages(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "staged"
    proc = prepare(LORA, "--from", str(data_dir), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    for rel in ("llama2_7b_hf/model.safetensors", "samsum_dataset/train.json", "mmlu_dataset/dev"):
        assert (out / rel).exists(), rel
    train = "samsum_dataset/train.json"
    assert (out / train).read_bytes() == (data_dir / train).read_bytes()


@pytest.mark.slow
def test_prepare_from_takes_the_earlier_names_into_flagperfs_layout(
    data_dir: Path, tmp_path: Path
) -> None:
    # FlagPerf's config names samsum_dataset/ and mmlu_dataset/ (the synthetic set's layout,
    # above); a directory staged by fleetperf's earlier docs (samsum/, mmlu/) still stages,
    # under FlagPerf's names, which is what the workload reads
    src = tmp_path / "src"
    shutil.copytree(data_dir, src)
    (src / "samsum_dataset").rename(src / "samsum")
    (src / "mmlu_dataset").rename(src / "mmlu")
    out = tmp_path / "staged"
    proc = prepare(LORA, "--from", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "fleetperf-data.json",
        "llama2_7b_hf",
        "mmlu_dataset",
        "samsum_dataset",
    ]
    assert (out / "mmlu_dataset/test/opposites_test.csv").read_bytes() == (
        src / "mmlu/test/opposites_test.csv"
    ).read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("breakage", "named"),
    [
        ("rm mmlu_dataset/dev/opposites_dev.csv", "mmlu_dataset/dev/opposites_dev.csv"),
        ("rm llama2_7b_hf/model.safetensors", "llama2_7b_hf/model.safetensors"),
        ("rm samsum_dataset", "samsum_dataset/ (or samsum)"),
        ("bad samsum_dataset/train.json", "samsum_dataset/train.json: record 1"),
        (
            "bad mmlu_dataset/test/abstract_algebra_test.csv",
            "mmlu_dataset/test/abstract_algebra_test.csv: row 1",
        ),
    ],
)
def test_prepare_from_names_the_first_bad_file(
    data_dir: Path, tmp_path: Path, breakage: str, named: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(data_dir, src)
    action, rel = breakage.split()
    if action == "rm" and (src / rel).is_dir():
        shutil.rmtree(src / rel)
    elif action == "rm":
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


@pytest.mark.slow
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

    blocks = samsum.pack(samsum.read_records(data_dir / samsum.TRAIN_JSON), tokenizer, 64)
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


@pytest.mark.slow
def test_packing_cuts_exact_blocks(data_dir: Path, tokenizer) -> None:
    samsum = case_module(LORA, "samsum")
    records = samsum.read_records(data_dir / samsum.TRAIN_JSON)[:50]
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


@pytest.mark.slow
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
    assert [i.cut for i in items] == [0] * 7
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


def flagperf_cut(tokenizer, prompt: str, seq_length: int) -> str:
    """FlagPerf's dataloader_mmlu.py (95df9aac, HEAD), verbatim but for the names."""
    while len(tokenizer.tokenize(prompt)) + 1 > seq_length:
        prompt_split = prompt.split("\n\n")
        prompt_split.pop(1)
        prompt = "\n\n".join(prompt_split)
    return prompt


@pytest.mark.slow
def test_mmlu_prompts_cut_to_seq_length_as_flagperf(tmp_path: Path, tokenizer, mmlu) -> None:
    shots = [[f"Shot number {i} " * 10, "w", "x", "y", "z", "A"] for i in range(5)]
    long_question = [" ".join(["Why"] * 300) + "?", "a", "b", "c", "d", "C"]
    _write_subject(tmp_path, "long", shots, [["Short?", "a", "b", "c", "d", "B"], long_question])
    full = mmlu.build_items(tmp_path, ["long"], tokenizer, 5, 4096)[0]
    assert full.cut == 0
    for limit in (len(full.input_ids) - 1, 120, 60, 512):
        items = mmlu.build_items(tmp_path, ["long"], tokenizer, 5, limit)
        dev = mmlu.read_questions(tmp_path / "dev/long_dev.csv")
        for item, q in zip(
            items, mmlu.read_questions(tmp_path / "test/long_test.csv"), strict=True
        ):
            want = flagperf_cut(tokenizer, mmlu.prompt("long", dev, q), limit)
            assert item.input_ids == tokenizer(want)["input_ids"], limit
            assert len(item.input_ids) <= limit
    fit = mmlu.build_items(tmp_path, ["long"], tokenizer, 5, len(full.input_ids) - 1)[0]
    assert fit.cut == 1 and tokenizer.decode(fit.input_ids).count("Shot number 0") == 0
    # a question longer than 512 tokens alone: FlagPerf's loop drops its pieces too, down to
    # the subject line, and scores what is left; the case does the same rather than stop
    alone = mmlu.build_items(tmp_path, ["long"], tokenizer, 5, 512)[1]
    assert alone.cut == 6 and "Why" not in tokenizer.decode(alone.input_ids)


@pytest.mark.slow
def test_missing_data_is_named_before_any_training(tmp_path: Path, data_dir: Path) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(data_dir, partial)
    shutil.rmtree(partial / "mmlu_dataset" / "dev")
    config = resolved_config(LORA, "cpu/CPUx1x1", tmp_path / "run")
    proc = run_workload(LORA, config, partial, timeout=300)
    assert proc.returncode == 2
    assert str(partial / "mmlu_dataset" / "dev") in proc.stderr
    (error,) = events(config.parent)
    assert error["kind"] == "error"


@pytest.mark.slow
def test_fleetperf_batch_on_cpu(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "res")
    out = fp.run("prepare", LORA, "--synthetic")
    assert out.returncode == 0, out.stderr
    out = fp.batch(LORA, "cpu/CPUx1x1", args=("--format", "json"), timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout)
    assert rec["status"] == "passed" and rec["config"] == "CPUx1x1"
    metrics = rec["metrics"]
    assert 0.0 <= metrics["acc"] <= 1.0
    for key in ("tokens_per_s_per_device", "loss", "mem_used_gib", "p_core"):
        assert isinstance(metrics[key], float) and metrics[key] > 0, key
    assert metrics["mfu"] is None  # no datasheet peak for a CPU
    assert metrics["lora_params"] == 4096  # the case's own metric (case.yaml)
    assert metrics["mfu_flagperf"] is None  # the CPU config's theory_flops 0: no peak named
    assert any(n.startswith("LoRA (seed's LoraConfig): 4096 trainable") for n in rec["notes"])
    received = events(fp.results / "runs" / rec["run_id"] / "hosts" / "localhost")
    result = next(e for e in received if e["kind"] == "result")
    assert set(result["mmlu_subjects"]) == {"abstract_algebra", "opposites"}  # every subject
    assert any("mmlu_subjects=all" in n and "mmlu_scoring=vocab" in n for n in rec["notes"])
    # FlagPerf's 3 epochs over the synthetic set's 20 blocks, its StepLR once per epoch
    steps = [e for e in received if e["kind"] == "step"]
    assert steps[-1]["samples"] == 60 and steps[-1]["tokens"] == 60 * 512
    assert sorted({e["lr"] for e in steps}, reverse=True) == pytest.approx(
        [0.003, 0.003 * 0.85, 0.003 * 0.85**2]
    )
    # a random Llama trained on dialogues puts no answer letter first: the note says why
    zero_note = any(n.startswith("acc 0: under FlagPerf's rule") for n in rec["notes"])
    assert zero_note == (metrics["acc"] == 0)


@pytest.mark.slow
def test_mmlu_gold_token_is_flagperfs(tokenizer, mmlu) -> None:
    # FlagPerf's evaluator compares the argmax with tokenizer([label]).input_ids[0][1]: the
    # token of the bare letter after BOS, the same token as the letter after "Answer:".
    letters = mmlu.letter_ids(tokenizer)
    assert [tokenizer([x])["input_ids"][0][1] for x in mmlu.LETTERS] == letters


def test_defaults_are_flagperfs_at_the_seed() -> None:
    # FlagPerf 95df9aac (and HEAD): _base.py num_epochs 3, seq_length 512, theory_flops
    # 1.56e14; dataloader_mmlu.py loops all 57 TASKS; evaluator.py's whole-vocabulary argmax
    spec = catalog.load_case(LORA, CASES)
    assert spec.defaults["mmlu_subjects"] == "all"
    assert spec.defaults["mmlu_scoring"] == "vocab"
    assert spec.defaults["num_epochs"] == 3 and spec.defaults["max_seq_length"] == 512
    assert spec.defaults["theory_flops"] == 1.56e14
    assert "max_samples" not in spec.defaults  # FlagPerf trains whole epochs, no sample budget


@pytest.mark.slow  # real training: two epochs of LoRA
def test_run_trains_flagperfs_epochs_and_reports_its_loss_and_mfu(
    tmp_path: Path, data_dir: Path
) -> None:
    # small blocks and batches keep it quick; what is checked is the schedule and the figures
    config = resolved_config(
        LORA,
        "cpu/CPUx1x1",
        tmp_path / "run",
        max_seq_length=64,
        train_batch_size=8,
        num_epochs=2,
        log_every_steps=1,
        warmup_steps=1,
        theory_flops=1.0e12,
        mmlu_subjects="opposites",
    )
    proc = run_workload(LORA, config, data_dir, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    received = events(config.parent)
    steps = [e for e in received if e["kind"] == "step"]
    (result,) = [e for e in received if e["kind"] == "result"]
    per_epoch = len(steps) // 2
    assert len(steps) == 2 * per_epoch and per_epoch > 2
    # FlagPerf's avg_train_loss: the mean of the two epochs' mean step losses (one step per
    # log line here), not the last window's loss
    epochs = [steps[:per_epoch], steps[per_epoch:]]
    means = [sum(e["loss"] for e in epoch) / per_epoch for epoch in epochs]
    assert result["metrics"]["loss"] == pytest.approx(sum(means) / 2, rel=1e-5)
    assert result["metrics"]["loss"] != pytest.approx(steps[-1]["loss"], rel=1e-5)
    assert [e["lr"] for e in epochs[1]] == pytest.approx([0.003 * 0.85] * per_epoch)
    # FlagPerf's MFU: tokens/p/s x 2 x 7e9 / theory_flops, beside the harness's
    tokens_per_s = result["metrics"]["tokens_per_s_per_device"]
    want = tokens_per_s * 2 * 7e9 / 1.0e12
    assert result["metrics"]["mfu_flagperf"] == pytest.approx(want, rel=1e-3)
    # every MMLU prompt cut to seq_length (64 here), as FlagPerf's dataloader_mmlu.py
    (subject,) = result["mmlu_subjects"]
    assert subject == "opposites"
    assert any(n.startswith("MMLU: 12 prompts cut to max_seq_length=64") for n in result["notes"])


def test_catalog_refuses_choices_without_the_default(tmp_path: Path) -> None:
    shutil.copytree(CASES / LORA, tmp_path / LORA)
    declared = tmp_path / LORA / "case.yaml"
    text = declared.read_text().replace("[vocab, letters]", "[letters]")
    declared.write_text(text)
    with pytest.raises(catalog.CatalogError, match="choices.mmlu_scoring: its default 'vocab'"):
        catalog.load_case(LORA, tmp_path)


@pytest.mark.slow
def test_bad_mmlu_subjects_refused_before_training(tmp_path: Path, data_dir: Path) -> None:
    config = resolved_config(
        LORA, "cpu/CPUx1x1", tmp_path / "run", mmlu_subjects="abstract_algebra,virology"
    )
    proc = run_workload(LORA, config, data_dir, timeout=300)
    assert proc.returncode == 2 and "no subject 'virology'" in proc.stderr, proc.stderr
    assert [e["kind"] for e in events(config.parent)] == ["start", "error"]  # no step


@pytest.mark.slow
def test_mmlu_scoring_choices_checked_by_catalog_and_workload(
    tmp_path: Path, data_dir: Path, mmlu
) -> None:
    # one list of rules: case.yaml's choices are mmlu.py's SCORING
    assert catalog.load_case(LORA, CASES).choices["mmlu_scoring"] == tuple(mmlu.SCORING)
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


@pytest.mark.slow
def test_half_precision_casts_the_model_as_flagperf(data_dir: Path) -> None:
    # FlagPerf's use_fp16: model.half() after peft, every weight (adapters too) half; the
    # device's cast does it, here for bf16, the half type a CPU runs
    import harness

    run = case_module(LORA, "run")
    device = harness.open_device("cpu", "bf16")
    model = run.lora_model(data_dir / "llama2_7b_hf", device)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    fp32 = run.lora_model(data_dir / "llama2_7b_hf", harness.open_device("cpu", "fp32"))
    assert {p.dtype for p in fp32.parameters()} == {torch.float32}


@pytest.mark.slow
def test_fp16_adapters_train_by_flagperfs_fused_adamw(data_dir: Path) -> None:
    # FlagPerf's fp16 step: GradScaler over a fused AdamW on the float16 adapters (its
    # optimizers/__init__.py: fused=True if use_fp16); an unfused one is refused by the scaler
    import harness

    run = case_module(LORA, "run")
    hp = SimpleNamespace(learning_rate=1e-3, weight_decay=0.0)
    model = run.lora_model(data_dir / "llama2_7b_hf", harness.open_device("cpu", "fp32")).half()
    ids = torch.tensor([[1, 5, 6, 7, 8, 9]])
    for precision, fused in (("fp16", True), ("fp32", False)):
        optimizer = run.lora_optimizer(model, hp, precision)
        assert optimizer.defaults["fused"] is fused
    adapters = [p for p in model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in adapters]
    scaler = torch.amp.GradScaler("cpu", init_scale=16.0)
    optimizer = run.lora_optimizer(model, hp, "fp16")
    for _ in range(2):  # B starts at zero: A moves from the second step on
        scaler.scale(model(input_ids=ids, labels=ids).loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    assert all(p.dtype == torch.float16 for p in adapters)
    assert all(not torch.equal(p, b) for p, b in zip(adapters, before, strict=True))
    scaler.scale(model(input_ids=ids, labels=ids).loss).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.step(run.lora_optimizer(model, hp, "fp32"))


def test_the_003_table_shows_the_precision_in_fix_hp() -> None:
    from tui.results.tables import to_markdown

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
