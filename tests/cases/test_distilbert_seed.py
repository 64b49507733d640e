"""Seed 001 (issue 19 point 5): `fleetperf prepare distilbert-pytorch --from DIR` stages
FlagPerf's own distilbert_train.tar layout (dataset/*.npz, model/) and GLUE's TSV layout;
the case trains from what it staged; the seed's bs=96 1x8 row has its config; every seed
row meets FlagPerf's accuracy target or, where FlagPerf's run ran out of epochs, passes as
FlagPerf published it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, Fleetperf
from seed_records import seed001_records

from tui.catalog import catalog
from tui.core import paths
from tui.results.references import verdict_for

CASE_DIR = REPO / "cases" / "distilbert-pytorch"
SEQ = 512  # FlagPerf padded every row to the tokenizer's model_max_length


def _prepare_module():
    spec = importlib.util.spec_from_file_location("distilbert_prepare", CASE_DIR / "prepare.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path[:0] = [str(REPO / "cases"), str(CASE_DIR)]  # prepare.py imports harness, sst2
    spec.loader.exec_module(mod)
    return mod


def _npz(path: Path, rows: list[tuple[str, int]], tokenizer) -> None:
    """What FlagPerf's create_train_eval_data.py writes: padding="max_length", numpy arrays."""
    enc = tokenizer([s for s, _ in rows], padding="max_length", truncation=True, max_length=SEQ)
    np.savez(
        path,
        idx=np.arange(len(rows)),
        sentence=np.array([s for s, _ in rows]),
        label=np.array([y for _, y in rows]),
        input_ids=np.array(enc["input_ids"]),
        attention_mask=np.array(enc["attention_mask"]),
    )


pytestmark = pytest.mark.xdist_group(__name__)  # one worker: module fixtures built once


# Building it takes seconds: the tests that use it are slow.
@pytest.fixture(scope="module")
def flagperf_tar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny distilbert_train.tar: distilbert/dataset/{train,eval}_dataset.npz and
    distilbert/model/ (a DistilBertForMaskedLM, pytorch_model.bin, and its tokenizer)."""
    import random

    from transformers import AutoTokenizer, DistilBertForMaskedLM

    prep = _prepare_module()
    tmp = tmp_path_factory.mktemp("flagperf")
    model = tmp / "distilbert" / "model"
    vocab = prep.vocabulary()
    prep.save_tokenizer(vocab, model)
    DistilBertForMaskedLM(prep.tiny_config(len(vocab))).save_pretrained(
        model, safe_serialization=False
    )
    tokenizer = AutoTokenizer.from_pretrained(model)
    rng = random.Random(7)
    (tmp / "distilbert" / "dataset").mkdir()
    # GLUE's sentences end with a space; FlagPerf's arrays keep it
    train = [(s + " ", y) for s, y in prep.make_rows(rng, 1200)]
    dev = [(s + " ", y) for s, y in prep.make_rows(rng, 200)]
    _npz(tmp / "distilbert" / "dataset" / "train_dataset.npz", train, tokenizer)
    _npz(tmp / "distilbert" / "dataset" / "eval_dataset.npz", dev, tokenizer)
    tar = tmp / "distilbert_train.tar"
    with tarfile.open(tar, "w") as t:
        t.add(tmp / "distilbert", arcname="distilbert")
    return tar


def _unpack(tar: Path, into: Path) -> Path:
    into.mkdir(parents=True)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into


def _fp(tmp_path: Path) -> Fleetperf:
    return Fleetperf(
        cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "results"
    )


def _rows(tsv: Path) -> list[tuple[str, int]]:
    lines = tsv.read_text(encoding="utf-8").split("\n")
    assert lines[0] == "sentence\tlabel" and lines[-1] == ""
    return [(s, int(y)) for s, y in (line.split("\t") for line in lines[1:-1])]


@pytest.mark.slow
def test_prepare_from_flagperfs_tar(flagperf_tar: Path, tmp_path: Path) -> None:
    unpacked = _unpack(flagperf_tar, tmp_path / "src")
    fp = _fp(tmp_path)
    out = fp.run("prepare", "distilbert-pytorch", "--from", str(unpacked))
    assert out.returncode == 0, out.stderr
    staged = fp.data_root / "distilbert-pytorch"
    model = unpacked / "distilbert" / "model"
    for f in model.iterdir():  # hard links of the tar's files
        assert (staged / "checkpoint" / f.name).stat().st_ino == f.stat().st_ino
    for tsv, npz in (("train.tsv", "train_dataset.npz"), ("dev.tsv", "eval_dataset.npz")):
        with np.load(unpacked / "distilbert" / "dataset" / npz) as f:
            want = list(zip(f["sentence"].tolist(), f["label"].tolist(), strict=True))
        assert _rows(staged / "SST-2" / tsv) == want
    manifest = json.loads((staged / "fleetperf-data.json").read_text())
    assert manifest["synthetic"] is False and manifest["source"] == str(unpacked)
    # run.py reads FlagPerf's own arrays: the staged npz are hard links of the tar's.
    for npz in ("train_dataset.npz", "eval_dataset.npz"):
        src = unpacked / "distilbert" / "dataset" / npz
        assert (staged / "dataset" / npz).stat().st_ino == src.stat().st_ino


@pytest.mark.slow  # prepares from GLUE's TSVs
def test_prepare_from_glue_tsvs(tmp_path: Path) -> None:
    fp = _fp(tmp_path)
    synthetic = _fp(tmp_path / "synthetic")
    assert synthetic.run("prepare", "distilbert-pytorch", "--synthetic").returncode == 0
    made = synthetic.data_root / "distilbert-pytorch"
    glue = tmp_path / "glue_data"
    (glue / "SST-2").mkdir(parents=True)
    for name in ("train.tsv", "dev.tsv", "test.tsv"):  # GLUE's SST-2 has a test split too
        src = made / "SST-2" / ("dev.tsv" if name == "test.tsv" else name)
        (glue / "SST-2" / name).write_bytes(src.read_bytes())
    (glue / "checkpoint").symlink_to(made / "checkpoint")
    out = fp.run("prepare", "distilbert-pytorch", "--from", str(glue))
    assert out.returncode == 0, out.stderr
    staged = fp.data_root / "distilbert-pytorch"
    for name in ("train.tsv", "dev.tsv"):
        assert (staged / "SST-2" / name).read_bytes() == (glue / "SST-2" / name).read_bytes()
    assert (staged / "checkpoint" / "config.json").is_file()
    # ... and tokenised as FlagPerf's create_train_eval_data.py does (what run.py reads).
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(staged / "checkpoint")
    dev = _rows(staged / "SST-2" / "dev.tsv")
    enc = tok([s for s, _ in dev], padding="max_length", truncation=True, max_length=SEQ)
    with np.load(staged / "dataset" / "eval_dataset.npz") as f:
        assert f["input_ids"].tolist() == enc["input_ids"]
        assert f["label"].tolist() == [y for _, y in dev]


def _damaged(flagperf_tar: Path, tmp_path: Path, **arrays: np.ndarray) -> Path:
    """The unpacked tar with arrays of eval_dataset.npz replaced (None: removed)."""
    src = _unpack(flagperf_tar, tmp_path / "src") / "distilbert"
    path = src / "dataset" / "eval_dataset.npz"
    with np.load(path) as f:
        data = {k: f[k] for k in f.files}
    data.update(arrays)
    np.savez(path, **{k: v for k, v in data.items() if v is not None})
    return src


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arrays", "says"),
    [
        ({"input_ids": None}, "no array 'input_ids'"),
        ({"sentence": np.array(["x"] * 200, dtype=object)}, "allow_pickle=False"),
        ({"label": np.full(200, 2)}, "lengths or labels differ"),
        ({"sentence": np.array(["the film is great "] * 200)}, "row 0: the checkpoint's"),
    ],
)
def test_a_bad_npz_is_named_and_nothing_staged(flagperf_tar, tmp_path, arrays, says) -> None:
    src = _damaged(flagperf_tar, tmp_path, **arrays)
    out = _fp(tmp_path).run("prepare", "distilbert-pytorch", "--from", str(src))
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"error: {src / 'dataset' / 'eval_dataset.npz'}: ") and says in line
    assert not (tmp_path / "data" / "distilbert-pytorch").exists()


@pytest.mark.slow
def test_the_case_trains_from_flagperfs_data(flagperf_tar: Path, tmp_path: Path) -> None:
    fp = _fp(tmp_path)
    src = _unpack(flagperf_tar, tmp_path / "src")
    assert fp.run("prepare", "distilbert-pytorch", "--from", str(src)).returncode == 0
    # FlagPerf's target (0.91; the CPU config asks 0.95 of its synthetic set), evaluated at
    # the end of each of the CPU config's 2 epochs of the tar's 1,200 rows.
    sets = ("target_acc=0.91",)
    out = fp.batch("distilbert-pytorch", "cpu/CPUx1x1", *sets, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    (rec,) = fp.records()
    assert rec["status"] == "passed" and rec["synthetic_data"] is False
    assert rec["metrics"]["acc"] >= rec["hp"]["target_acc"]


# -- the seed's rows: configs and target ------------------------------------------------


def test_the_bs96_1x8_row_has_its_config() -> None:
    case = catalog.load_case("distilbert-pytorch", paths.HARNESS_DIR)
    config = catalog.load_config(case, "nvidia/A100x1x8-bs96")
    assert (config.chip, config.nnodes, config.nproc_per_node) == ("A100", 1, 8)
    spec = catalog.resolve(case, config)
    assert spec.hp["train_batch_size"] == 96 and spec.seed_fix_hp == {"train_batch_size": 96}
    assert spec.config.name == "A100x1x8-bs96"
    assert {(r.metric, r.value) for r in config.references} >= {("p_core", 2181.0)}
    first = catalog.load_config(case, "nvidia/A100x1x8")
    assert ("p_core", 2181.0) not in {(r.metric, r.value) for r in first.references}


def test_every_seed_row_meets_the_target_or_passes_as_flagperf_published_it() -> None:
    """The target is FlagPerf's target_acc 0.91 (_base.py at f3c253a0). Three rows reached
    it; the bs=96 1x8 row (0.908) ran its 10 epochs without, and its config alone lets a run
    that does so pass (require_target false)."""
    case = catalog.load_case("distilbert-pytorch", paths.HARNESS_DIR)
    assert case.target is not None and case.target.value == 0.91
    short = []
    for record in seed001_records():
        variant = "-bs96" if record.config == "A100x1x8" and record.fix_hp else ""
        config = catalog.load_config(case, f"nvidia/{record.config}{variant}")
        spec = catalog.resolve(case, config)
        # the config reproduces the row's hyperparameters and FlagPerf's stopping rule
        assert spec.seed_fix_hp == record.fix_hp, config.ref
        assert (spec.hp["target_acc"], spec.hp["max_epoch"]) == (0.91, 10), config.ref
        reached = record.metrics["acc"] >= spec.hp["target_acc"]
        assert spec.hp["require_target"] is reached, (config.ref, record.metrics["acc"])
        short += [] if reached else [config.ref]
    assert short == ["nvidia/A100x1x8-bs96"]


def test_the_bs96_row_as_flagperf_ran_it_is_judged_and_not_flagged() -> None:
    """The row's figures are a run of all 10 epochs (334.7 s = 10 x 67,584 samples /
    2,019.1): on its A100 the config's references judge such a run, like for like, and
    flag none of them; and they cannot be met by a run that stopped early at a lower
    target (the config stops at 0.91 or after 10 epochs, not at 0.90)."""
    case = catalog.load_case("distilbert-pytorch", paths.HARNESS_DIR)
    spec = catalog.resolve(case, catalog.load_config(case, "nvidia/A100x1x8-bs96"))
    assert (spec.hp["target_acc"], spec.hp["max_epoch"], spec.hp["require_target"]) == (
        0.91,
        10,
        False,
    )
    (row,) = [r for r in seed001_records() if r.config == "A100x1x8" and r.fix_hp]
    assert row.metrics["e2e_time"] == pytest.approx(
        10 * 88 * 96 * 8 / row.metrics["p_whole"], abs=0.05
    )
    # the page's e2e_time is FlagPerf's clock from main: fleetperf's e2e_time_main
    metrics = {**row.metrics, "e2e_time_main": row.metrics["e2e_time"]}
    environment = {"accelerator": "NVIDIA A100-SXM4-40GB"}
    run = row.model_copy(update={"hp": spec.hp, "metrics": metrics, "environment": environment})
    verdict = verdict_for(run, spec, [])
    assert {c.metric for c in verdict.checks} == {r.metric for r in spec.config.references}
    assert not verdict.flagged


def test_prepare_needs_a_source(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(CASE_DIR / "prepare.py"), "--out", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2 and "dataset/*.npz" in out.stderr
