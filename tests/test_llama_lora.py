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
from llm_cases import LORA, case_module, events, prepare, resolved_config, run_workload


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
    assert mmlu.subjects(root) == ["arithmetic", "opposites"]
    rows = list(csv.reader((root / "test" / "arithmetic_test.csv").open()))
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
        ("bad mmlu/test/arithmetic_test.csv", "mmlu/test/arithmetic_test.csv: row 1"),
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
    per = mmlu.score(model, items, letters)
    assert per["world_history"] == {"correct": 2, "total": 4, "acc": 0.5}
    assert per["high_school_mathematics"] == {"correct": 1, "total": 3, "acc": 1 / 3}
    assert mmlu.overall(per) == pytest.approx(3 / 7)


def test_mmlu_prompt_is_the_standard_one(mmlu) -> None:
    q = mmlu.Question("What is 1+1?", ("1", "2", "3", "4"), 1)
    shot = mmlu.Question("What is 2+2?", ("4", "5", "6", "7"), 0)
    assert mmlu.prompt("high_school_mathematics", [shot], q) == (
        "The following are multiple choice questions (with answers) about high school "
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
    assert set(result["mmlu_subjects"]) == {"arithmetic", "opposites"}
    steps = [e for e in received if e["kind"] == "step"]
    assert steps[-1]["samples"] == 60 and steps[-1]["tokens"] == 60 * 512
