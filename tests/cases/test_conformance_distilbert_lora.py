"""Issue 40 points 4-6: DistilBERT (seed 001) and LoRA (seed 003) against FlagPerf's code.

4. FlagPerf scored LoRA's MMLU in training mode (run_pretraining.py @ 95df9aac: model.train()
   at each epoch's start, model.eval() only in evaluation(), never run): the seed rows do
   too; hp mmlu_mode=eval is fleetperf's own correction, named in the record and fix_hp.
5. DistilBERT's epoch order (dataloader.py, trainer.py @ f3c253a0): one process, a
   RandomSampler whose one generator, seeded 0, advances from epoch to epoch; several, a
   DistributedSampler never told the epoch (epoch 0's order every epoch). hp
   epoch_order=reshuffle is fleetperf's own per-epoch shuffle, named likewise.
6. DistilBERT's e2e_time_main: FlagPerf's clock starts after its imports and reads
   pre-tokenised npz; run.py imports before main() and reads the prepared dataset/*.npz.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from llm_cases import CASES, LORA, case_module, env, prepare, resolved_config, run_workload
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

from tui.catalog import catalog

DISTILBERT = "distilbert-pytorch"
SEED_CONFIGS = ("nvidia/A100x1x1", "nvidia/A100x1x8", "nvidia/A100x1x8-bs96", "nvidia/A100x2x8")
ROWS, BATCH, EPOCHS = 103, 8, 3


def _resolve(case: str, ref: str, **sets: object) -> catalog.RunSpec:
    spec = catalog.load_case(case, CASES)
    return catalog.resolve(spec, catalog.load_config(spec, ref), dict(sets))


def _epochs(sampler, drop_last: bool = True) -> list[list[int]]:
    """Each epoch's row indices (whole batches only, as Run.train_loader's) as Run.train
    drives a loader: it calls set_epoch(epoch) before each epoch where the sampler has one."""
    loader = DataLoader(range(ROWS), batch_size=BATCH, sampler=sampler, drop_last=drop_last)
    out = []
    for epoch in range(EPOCHS):
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        out.append([int(i) for batch in loader for i in batch])
    return out


def _epoch_sampler(order: str, replicas: int, rank: int):
    return case_module(DISTILBERT, "run").epoch_sampler(range(ROWS), order, replicas, rank, 0)


def test_run_py_stays_at_160_lines_or_fewer() -> None:
    """What a seed needs to run as FlagPerf did lives in the harness or the case's own
    modules; run.py reads as model, data and evaluation."""
    for case in (DISTILBERT, LORA, "llama2_7b-deepspeed"):
        lines = (CASES / case / "run.py").read_text().count("\n")
        assert lines <= 160, f"{case}/run.py: {lines} lines"


# -- point 5: DistilBERT's epoch order ----------------------------------------------------
def test_distilbert_seed_rows_run_flagperfs_order_and_reshuffle_is_named_in_fix_hp() -> None:
    for ref in SEED_CONFIGS:
        spec = _resolve(DISTILBERT, ref)
        assert spec.hp["epoch_order"] == "flagperf" and "epoch_order" not in spec.fix_hp, ref
    own = _resolve(DISTILBERT, "nvidia/A100x1x8", epoch_order="reshuffle")
    assert own.seed_fix_hp["epoch_order"] == "reshuffle"  # the table's fix_hp names it


def test_distilbert_one_process_order_is_flagperfs_random_sampler() -> None:
    """dataloader.py's build_train_sampler without a process group, one loader for the
    whole run: its generator advances, so each epoch has an order of its own."""
    generator = torch.Generator()
    generator.manual_seed(0)  # config.seed, _base.py
    flagperf = RandomSampler(range(ROWS), generator=generator)
    want = _epochs(flagperf, drop_last=False)  # _base.py dataloader_drop_last False
    got = _epochs(_epoch_sampler("flagperf", 1, 0))
    assert got == [epoch[: ROWS // BATCH * BATCH] for epoch in want]
    assert got[0] != got[1] != got[2]


def test_distilbert_several_processes_repeat_epoch_zeros_order() -> None:
    """With a process group: DistributedSampler(seed=0), and FlagPerf's trainer never calls
    set_epoch, so every epoch on every rank is epoch 0's."""
    for rank in range(8):
        flagperf = DistributedSampler(range(ROWS), num_replicas=8, rank=rank, seed=0)
        epoch0 = [int(i) for i in flagperf][: ROWS // 8 // BATCH * BATCH]
        assert _epochs(_epoch_sampler("flagperf", 8, rank)) == [epoch0] * EPOCHS, rank


def test_distilbert_reshuffle_is_a_new_order_every_epoch_on_every_config() -> None:
    for replicas in (1, 8):
        got = _epochs(_epoch_sampler("reshuffle", replicas, 0))
        assert got[0] != got[1] != got[2], replicas
        fresh = DistributedSampler(range(ROWS), num_replicas=replicas, rank=0, seed=0)
        fresh.set_epoch(2)
        assert got[2] == [int(i) for i in fresh][: len(got[2])]


# -- point 6: DistilBERT's timed window -----------------------------------------------------
def test_distilbert_imports_transformers_before_main_starts_the_clock() -> None:
    """FlagPerf's e2e_time starts in __main__ after its imports (trainer.py imports model/,
    which imports transformers): run.py's imports, not main(), bring transformers in."""
    case_dir = CASES / DISTILBERT
    code = (
        "import importlib.util, sys\n"
        f"sys.path[:0] = [{str(CASES)!r}, {str(case_dir)!r}]\n"
        f"spec = importlib.util.spec_from_file_location('run', {str(case_dir / 'run.py')!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print('transformers' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env(), capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


@pytest.mark.slow
def test_distilbert_run_reads_pretokenised_rows_and_names_its_order(tmp_path: Path) -> None:
    """The run reads dataset/*.npz as FlagPerf's DistilBertDataset does, tokenising nothing:
    it trains with the TSVs gone; its record names the epoch order."""
    data = tmp_path / "data"
    proc = prepare(DISTILBERT, "--synthetic", "--out", str(data), "--train-rows", "480")
    assert proc.returncode == 0, proc.stderr
    for tsv in (data / "SST-2").iterdir():
        tsv.unlink()
    config = resolved_config(DISTILBERT, "cpu/CPUx1x1", tmp_path / "run", max_samples=160)
    proc = run_workload(DISTILBERT, config, data, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(config.read_text())["hp"]["epoch_order"] == "flagperf"
    notes = " ".join(_result(config.parent)["notes"])
    assert "epoch_order=flagperf: FlagPerf's samplers" in notes
    assert "e2e_time_main as FlagPerf's e2e_time" in notes


# -- point 4: LoRA's MMLU mode ----------------------------------------------------------
@pytest.fixture(scope="module")
def lora_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lora") / LORA
    proc = prepare(LORA, "--synthetic", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_lora_seed_rows_score_in_train_mode_and_eval_is_named_in_fix_hp() -> None:
    for ref in ("nvidia/A100x1x1", "nvidia/H100x1x1"):
        assert _resolve(LORA, ref).hp["mmlu_mode"] == "train", ref
    own = _resolve(LORA, "nvidia/A100x1x1", mmlu_mode="eval")
    assert own.seed_fix_hp["mmlu_mode"] == "eval"


def _dropout_modes(lora_data: Path, mode: str) -> set[bool]:
    """The ``training`` flag of every LoRA dropout module at each call while MMLU scores."""
    import harness
    from transformers import AutoTokenizer

    run, mmlu = case_module(LORA, "run"), case_module(LORA, "mmlu")
    model = run.lora_model(lora_data / run.CHECKPOINT, harness.open_device("cpu", "fp32"))
    tokenizer = AutoTokenizer.from_pretrained(lora_data / run.CHECKPOINT)
    root = lora_data / mmlu.DIR
    names = mmlu.select(root, "all")[:1]
    items = mmlu.build_items(root, names, tokenizer, 5, 512)[:3]
    seen: set[bool] = set()
    dropouts = [m for n, m in model.named_modules() if n.endswith("lora_dropout.default")]
    assert dropouts and all(m.p == 0.05 for m in dropouts)  # the seed's LoraConfig
    for m in dropouts:
        m.register_forward_pre_hook(lambda module, args: seen.add(module.training))
    model.train()  # as after FlagPerf's training epochs
    mmlu.score_model(model, "cpu", items, mmlu.letter_ids(tokenizer), "vocab", mode)
    assert model.training  # scoring leaves the model as training left it
    return seen


@pytest.mark.slow
def test_lora_mmlu_scores_with_dropout_active_as_flagperf(lora_data: Path) -> None:
    assert _dropout_modes(lora_data, "train") == {True}
    assert _dropout_modes(lora_data, "eval") == {False}


@pytest.mark.slow
def test_lora_record_names_the_mmlu_mode(tmp_path: Path, lora_data: Path) -> None:
    config = resolved_config(LORA, "cpu/CPUx1x1", tmp_path / "run", num_epochs=1)
    proc = run_workload(LORA, config, lora_data, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(config.read_text())["hp"]["mmlu_mode"] == "train"
    notes = _result(config.parent)["notes"]
    assert any(n.startswith("mmlu_mode=train: scored in training mode") for n in notes)


def _result(run_dir: Path) -> dict:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return next(e for e in map(json.loads, lines) if e["kind"] == "result")
