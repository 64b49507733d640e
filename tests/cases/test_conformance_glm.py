"""Seed 000 (glm-pytorch) against FlagPerf's code at e5edef37: issue 40 points 2, 7, 9, 10.

Each test states what FlagPerf's (or, for the data, Iluvatar's data script's) code does and
checks the case does the same; docs/cases/glm.md's conformance table cites them.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO
from half_run import half_run

CASE_DIR = REPO / "cases" / "glm-pytorch"
sys.path.insert(0, str(CASE_DIR))

from harness.case import Hyper  # noqa: E402

from tui.catalog import catalog  # noqa: E402
from tui.results.record import RunRecord  # noqa: E402
from tui.results.tables import to_markdown  # noqa: E402

pytestmark = pytest.mark.xdist_group(__name__)  # one worker: the module fixture built once
SEED_ROWS = ("iluvatar/BI-V100x1x1", "iluvatar/BI-V100x1x8", "iluvatar/BI-V100x2x8")
NAMES = [f"Ent{chr(97 + i)}" for i in range(14)]  # 14 entities: more than 10 candidates


def _prepare(*args: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(CASE_DIR / "prepare.py"), *args],
        env={"PYTHONPATH": str(REPO / "cases"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _passage(idx: int) -> dict:
    """14 entities, one of them with a curly apostrophe; a question with two gold answers
    (one of them curly), one whose gold answer is no entity, one without answers."""
    text = " ".join(f"{n} met O\u2019Neil ." if n == "Entc" else f"{n} ran ." for n in NAMES)
    spans = [(text.index(n), len(n)) for n in NAMES]
    spans.append((text.index("O\u2019Neil"), len("O\u2019Neil")))
    ents = [{"start": s, "end": s + n - 1} for s, n in spans]
    qas = [
        {
            "idx": 0,
            "query": "@placeholder ran .",
            "answers": [{"text": "Entk"}, {"text": "O\u2019Neil"}],
        },  # noqa: E501
        {"idx": 1, "query": "@placeholder won .", "answers": [{"text": "Zed"}]},
        {"idx": 2, "query": "@placeholder lost .", "answers": []},
    ]
    return {"idx": idx, "passage": {"text": text, "entities": ents}, "qas": qas}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The synthetic set and a --from of a ReCoRD with more than 10 entities a passage."""
    root = tmp_path_factory.mktemp("glmconf")
    synthetic = root / "synthetic"
    _prepare("--synthetic", "--out", str(synthetic))
    src = root / "src"
    (src / "ReCoRD").mkdir(parents=True)
    for name in ("checkpoint/mp_rank_00_model_states.pt", "checkpoint/vocab.txt"):
        (src / Path(name).name).symlink_to(synthetic / name)
    rows = "".join(json.dumps(_passage(i)) + "\n" for i in range(3))
    for split in ("train.jsonl", "val.jsonl"):
        (src / "ReCoRD" / split).write_text(rows, encoding="utf-8")
    staged = root / "staged"
    _prepare("--from", str(src), "--out", str(staged))
    return {"synthetic": synthetic, "from": staged}


def _examples(data: Path, split: str) -> list[dict]:
    path = data / "ReCoRD" / "glm_train_eval" / f"{split}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ------------------------------------------------------------------------ point 2: data
@pytest.mark.parametrize("source", ["synthetic", "from"])
def test_prepared_training_examples_have_the_gold_first_and_at_most_10(
    prepared: dict[str, Path], source: str
) -> None:
    """FlagPerf's my_collate sets label 0 on every training example: the gold answer is
    first. Iluvatar's create_train_eval_data.py (dataset.py _create_examples) writes one
    example per gold answer with at most 9 other entities, sorted by candidate count."""
    examples = _examples(prepared[source], "train")
    assert examples
    for ex in examples:
        assert 2 <= len(ex["candidates"]) <= 10 and ex["answers"] == ex["candidates"][:1]
    sizes = [len(ex["candidates"]) for ex in examples]
    assert sizes == sorted(sizes)


def test_training_examples_are_the_data_scripts(prepared: dict[str, Path]) -> None:
    """The --from set, example for example as dataset.py makes them: punctuation
    standardised, one example per distinct gold answer (the other gold answers never a
    negative), a gold answer that is no entity kept, a question without answers dropped,
    negatives from the sorted entities shuffled by one random.Random(42) and cut to 9."""
    entities = sorted([*NAMES, "O'Neil"])
    shuffler, expected = random.Random(42), []
    for _ in range(3):  # three passages, in file order
        for query, golds in (
            ("@placeholder ran .", ["Entk", "O'Neil"]),
            ("@placeholder won .", ["Zed"]),
        ):  # noqa: E501
            for gold in golds:
                negatives = [e for e in entities if e not in golds]
                shuffler.shuffle(negatives)  # always more than 9 here
                expected.append((query, [gold, *negatives[:9]]))
    expected.sort(key=lambda e: len(e[1]))
    got = [(ex["query"], ex["candidates"]) for ex in _examples(prepared["from"], "train")]
    assert got == expected
    evaluation = _examples(prepared["from"], "eval")
    assert len(evaluation) == 9 and all(ex["candidates"] == entities for ex in evaluation)
    assert evaluation[0]["answers"] == ["Entk", "O'Neil"]


def test_a_step_computes_flagperfs_sequences(prepared: dict[str, Path]) -> None:
    """The work per step: a batch of training examples pads to its most candidates (<= 10
    on the --from set, 15 entities a passage), the label is 0 (my_collate)."""
    import glm_data
    from record import WordPiece, collate, encode_question

    data = prepared["from"]
    tok = WordPiece(data / "checkpoint" / "vocab.txt")
    train = glm_data.read_examples(data / glm_data.TRAIN, train=True)
    batch = collate([encode_question(tok, q, 128) for q in train[:8]], 128, tok)
    assert batch["input_ids"].shape[0] == 8 * 10 and batch["labels"].tolist() == [0] * 8


# --------------------------------------------------------------------- point 7: sampler
def test_sampler_is_flagperfs_seed_0_and_keeps_the_last_batch(tmp_path: Path) -> None:
    """FlagPerf's build_data_loader: DistributedSampler(dataset, rank, num_replicas,
    shuffle=True) (seed 0, drop_last False) and DataLoader(drop_last=False) for training;
    its trainer calls set_epoch(epoch)."""
    import glm_data

    with half_run(tmp_path) as run:
        loader = glm_data.train_loader(run, list(range(13)), 4, None, "rows")
        for epoch in (0, 1):
            loader.sampler.set_epoch(epoch)
            batches = [b.tolist() for b in loader]
            order = torch.randperm(13, generator=torch.Generator().manual_seed(epoch)).tolist()
            assert [len(b) for b in batches] == [4, 4, 4, 1]
            assert sum(batches, []) == order


# ---------------------------------------------------------------- point 9: LayerNorm decay
def _model() -> torch.nn.Module:
    from glm_model import GLMConfig, GLMModel

    return GLMModel(GLMConfig(40, 32, 2, 4, 32))


def test_seed_rows_decay_layernorm_weights_as_flagperf_did() -> None:
    """glm_get_params_for_weight_decay_optimization exempts torch.nn.LayerNorm modules; the
    iluvatar converter (extern/converter.py, layers/layernorm.py) made them apex
    FusedLayerNorm, so FlagPerf decayed their weights (not their biases: by name)."""
    from glm_optim import param_groups

    case = catalog.load_case("glm-pytorch", REPO / "cases")
    for ref in SEED_ROWS:
        hp = catalog.resolve(case, catalog.load_config(case, ref)).hp
        assert hp["layernorm_decay"] == "flagperf", ref
    model = _model()
    names = {id(p): n for n, p in model.named_parameters()}
    decay, no_decay = param_groups(model, 0.1, "flagperf")
    assert {names[id(p)] for p in no_decay["params"]} == {
        n for n in names.values() if n.endswith(".bias")
    }
    assert "transformer.final_layernorm.weight" in {names[id(p)] for p in decay["params"]}
    decay, no_decay = param_groups(model, 0.1, "fleetperf")
    assert {names[id(p)] for p in no_decay["params"]} == {
        n for n in names.values() if n.endswith(".bias") or "layernorm" in n
    }


def test_fleetperfs_own_layernorm_exemption_is_named_in_the_table() -> None:
    """`--set layernorm_decay=fleetperf` on a seed row: fix_hp says so (and leaves the seed's
    references unjudged: other hyperparameters); the seed row shows bs and lr only."""
    case = catalog.load_case("glm-pytorch", REPO / "cases")
    config = catalog.load_config(case, "iluvatar/BI-V100x1x8")
    rows = []
    for sets in ({}, {"layernorm_decay": "fleetperf"}):
        spec = catalog.resolve(case, config, sets)
        rows.append(
            RunRecord(
                run_id=f"r-{len(rows)}",
                case=case.name,
                vendor="iluvatar",
                config=config.name,
                status="passed",
                started="2026-11-29T05:00:00Z",
                precision=spec.precision,
                fix_hp=spec.seed_fix_hp,
                hp=spec.hp,
                chip=config.chip,
                nnodes=config.nnodes,
                nproc_per_node=config.nproc_per_node,
                columns=case.report,
                short_names=case.short_names,
                metrics={"acc": 0.81},
            )
        )
    table = to_markdown(rows)
    assert "| bs=8,lr=1e-05 |" in table
    assert "| bs=8,lr=1e-05,layernorm_decay=fleetperf |" in table


# ------------------------------------------------------------------ point 10: loss scaler
def test_loss_scaler_hysteresis_is_flagperfs(tmp_path: Path) -> None:
    """DynamicLossScaler(init_scale 2^32, scale_window 1000, min_scale 1, delayed_shift 2,
    consecutive_hysteresis False): the first overflow keeps the scale, every later one
    halves it, clean steps do not give the hysteresis back, a growth (1000 clean steps after
    the last overflow) does. Every overflowing step is skipped, and the schedule with it."""
    from glm_optim import glm_optimizer, optimize

    hp = Hyper({"learning_rate": 1e-3, "weight_decay": 0.1, "layernorm_decay": "flagperf"})
    hp = Hyper({**hp, "lr_warmup": 0.0, "lr_decay_iters": 10**6, "lr_decay_ratio": 1.0})
    with half_run(tmp_path) as run:
        model = torch.nn.Linear(2, 1)  # float32: no overflow but the ones made below
        optimizer, scheduler = glm_optimizer(run.device, model, hp)
        x = torch.ones(1, 2)
        plan = [True] * 3 + [False] * 999 + [True] + [False] * 1000 + [True] * 2
        scales, stepped = [], []
        for overflow in plan:
            before = model.weight.detach().clone()
            loss = model(x).sum() * (float("inf") if overflow else 1e-3)
            stepped.append(optimize(run, loss, optimizer, scheduler, clip_grad=1.0))
            assert torch.equal(model.weight, before) == overflow
            scales.append(run.device.scaler.get_scale())
    assert stepped == [not o for o in plan] and scheduler.last_epoch == plan.count(False)
    e = 2.0**32
    assert scales[:3] == [e, e / 2, e / 4]  # torch's GradScaler: e/2, e/4, e/8
    assert set(scales[3:1002]) == {e / 4}
    assert scales[1002] == e / 8  # 999 clean steps gave no hysteresis back
    assert set(scales[1003:2002]) == {e / 8} and scales[2002] == e / 4  # grown: 1000 clean
    assert scales[2003:] == [e / 4, e / 8]  # the hysteresis back with the growth
