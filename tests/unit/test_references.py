"""References and history bands (tui/results/references.py): the rule with seeded noise, where a
reference judges and where it is only shown, verdicts through the real store and the
catalog, and --batch's exit 3 through the real command."""

from __future__ import annotations

import importlib.util
import random
import shutil
import sys
from pathlib import Path

import pytest
from conftest import Fleetperf
from harness.metrics import METRICS

from tui.batch import flag_line
from tui.catalog import catalog
from tui.core import paths
from tui.results.record import RunRecord
from tui.results.references import (
    HISTORY_RUNS,
    MIN_HISTORY,
    history_band,
    history_of,
    judge,
    verdict_for,
)
from tui.results.store import ResultStore

A100 = "NVIDIA A100-SXM4-40GB"


def _spec(ref: str = "nvidia/A100x1x1", sets: dict | None = None) -> catalog.RunSpec:
    case = catalog.load_case("distilbert-pytorch", paths.HARNESS_DIR)
    return catalog.resolve(case, catalog.load_config(case, ref), sets)


def _record(
    i: int, spec: catalog.RunSpec, accelerator: str = A100, status: str = "passed", **metrics: float
) -> RunRecord:
    return RunRecord(
        run_id=f"20261101-{i:06d}-distilbert-pytorch-{i:04x}",
        case=spec.case.name,
        vendor=spec.config.vendor,
        config=spec.config.name,
        status=status,
        started=f"2026-11-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
        hp=spec.hp,
        fix_hp=spec.seed_fix_hp,
        metrics=metrics,
        environment={"accelerator": accelerator},
        synthetic_data=False,
    )


# -- the rule, with seeded noise ------------------------------------------------------


def _false_alarms_and_detections(
    noise: float, drop: float, runs: int = HISTORY_RUNS, trials: int = 4000
) -> tuple[float, float]:
    """Over ``trials`` seeded histories of ``runs`` quiet runs (relative noise ``noise``):
    how often a further quiet run falls outside the band, and how often a run ``drop``
    slower does (docs/references.md has the table)."""
    rng = random.Random(22)
    metric = METRICS["p_core"]
    alarms = detected = 0
    for _ in range(trials):
        history = [100 * (1 + rng.gauss(0, noise)) for _ in range(runs)]
        low, _, _, _ = history_band(history, metric)
        alarms += 100 * (1 + rng.gauss(0, noise)) < low
        detected += 100 * (1 - drop) * (1 + rng.gauss(0, noise)) < low
    return alarms / trials, detected / trials


def test_quiet_host_noise_rarely_alarms_and_a_slowdown_is_caught() -> None:
    # Issue 42: flagged only past the band (one run's noise) by more than the 15 % floor,
    # as qualification judges; docs/references.md has the table.
    # 3 % run-to-run noise (a quiet host).
    for runs in (MIN_HISTORY, HISTORY_RUNS):
        alarms, caught = _false_alarms_and_detections(0.03, drop=0.40, runs=runs)
        assert alarms < 0.005 and caught > 0.99
        assert _false_alarms_and_detections(0.03, drop=0.30, runs=runs)[1] > 0.9
    # 7 % noise (this shared 2-core host): the MAD term widens the band.
    alarms, caught = _false_alarms_and_detections(0.07, drop=0.40)
    assert alarms < 0.005 and caught > 0.75
    alarms, caught = _false_alarms_and_detections(0.07, drop=0.40, runs=MIN_HISTORY)
    assert alarms < 0.01 and caught > 0.8


def test_the_band_takes_the_side_that_matters() -> None:
    quiet = [100.0, 101.0, 99.0, 100.5]
    low, high, median, half = history_band(quiet, METRICS["p_core"])
    # MAD 0.5: the band is 100.25 +- 3 x 1.4826 x 0.5; the floor 15 % of 100.25 past it.
    assert high is None and median == pytest.approx(100.25)
    assert low == pytest.approx(100.25 - 3 * 1.4826 * 0.5 - 0.15 * 100.25)
    low, high, *_ = history_band([1.0, 1.01, 0.99], METRICS["loss"])  # loss: up is worse
    assert low is None and high == pytest.approx(1.0 + 3 * 1.4826 * 0.01 + 0.15)
    assert history_band([1.0, 1.0, 1.0], METRICS["mem_total_gib"]) is None  # no direction
    assert history_band([100.0] * (MIN_HISTORY - 1), METRICS["p_core"]) is None


def test_one_wild_run_in_the_history_does_not_move_the_band() -> None:
    steady = [100.0, 99.0, 101.0, 100.0, 98.0, 102.0]
    with_outlier = [*steady[:3], 10.0, *steady[3:]]
    assert history_band(with_outlier, METRICS["p_core"])[0] == pytest.approx(
        history_band(steady, METRICS["p_core"])[0], rel=0.02
    )


def test_history_is_same_case_config_hp_accelerator_and_data_passed_only() -> None:
    spec = _spec()
    new = _record(100, spec, p_core=250.0)
    others = [
        _record(1, spec, p_core=290.0),
        _record(2, spec, status="failed", p_core=290.0),
        _record(3, spec, accelerator="NVIDIA H100 80GB HBM3", p_core=290.0),
        _record(4, _spec(sets={"train_batch_size": 64}), p_core=290.0),
        _record(5, spec, p_core=290.0).model_copy(update={"synthetic_data": True}),
        _record(6, _spec("nvidia/A100x1x8"), p_core=290.0),
        _record(200, spec, p_core=290.0),  # started after: not its history
        *(_record(10 + i, spec, p_core=290.0) for i in range(HISTORY_RUNS + 2)),
    ]
    history = history_of(new, others)
    assert [r.run_id for r in history] == [_record(10 + i, spec).run_id for i in range(2, 12)]


def test_history_leaves_runs_on_a_loaded_host_out_and_says_so() -> None:
    """Issue 29 point 6: a run the tables mark "loaded host" no longer widens a quiet run's
    band (loaded and quiet hosts are histories apart), and the verdict says so."""
    spec = _spec()
    new = _record(100, spec, p_core=240.0)  # under the quiet band (>= 248.2)
    quiet = [_record(i, spec, p_core=290.0 + i) for i in range(1, 4)]
    busy = _record(5, spec, p_core=120.0).model_copy(update={"load_per_cpu": 1.2})
    assert history_of(new, [*quiet, busy]) == quiet
    verdict = verdict_for(new, spec, [*quiet, busy])
    (check,) = [c for c in verdict.checks if (c.metric, c.source) == ("p_core", "history")]
    assert "of 3 earlier passed run(s)" in check.basis and check.flagged
    assert "history: 1 comparable run(s) on a loaded host left out" in verdict.notes
    assert not any("loaded" in n for n in verdict_for(new, spec, quiet).notes)
    # A run on a loaded host is judged against loaded-host runs only.
    busy_new = new.model_copy(update={"load_per_cpu": 2.0})
    assert history_of(busy_new, [*quiet, busy]) == [busy]
    assert "history: 3 comparable run(s) on a quiet host left out" in (
        verdict_for(busy_new, spec, [*quiet, busy]).notes
    )


# -- references -----------------------------------------------------------------------


def test_a_seed_reference_judges_its_hardware_and_is_shown_elsewhere() -> None:
    spec = _spec()  # A100x1x1: seed 001's row, p_core 287.9 (lower -10 %)
    slow = _record(1, spec, p_core=250.0, acc=0.912)
    verdict = verdict_for(slow, spec, [])
    (flag,) = verdict.flagged
    assert flag.metric == "p_core" and flag.source == "reference"
    assert flag.low == pytest.approx(287.9 * 0.9) and flag.high is None
    assert "FlagPerf seed 001" in flag.basis
    line = flag_line(slow, flag)
    assert "p_core 250.0 samples/s outside >= 259.1" in line and "reference" in line
    # The same numbers on an H100, or with another batch size: shown, not judged.
    h100 = verdict_for(_record(2, spec, accelerator="NVIDIA H100", p_core=250.0), spec, [])
    assert not h100.checks
    assert any("shown, not judged: ran on NVIDIA H100" in n for n in h100.notes)
    other = _spec(sets={"train_batch_size": 64})
    assert not verdict_for(_record(3, other, p_core=250.0), other, []).checks


def test_a_reference_with_hp_judges_the_seeds_second_row() -> None:
    spec = _spec("nvidia/A100x1x8-bs96")  # seed row 2: p_core 2181.0
    verdict = verdict_for(_record(1, spec, p_core=1950.0), spec, [])
    (flag,) = verdict.flagged  # 1950 is fine for row 1 (1942.6) but not for row 2
    assert flag.low == pytest.approx(2181.0 * 0.9)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{metric: p_core, value: 1, unit: tokens/s, source: s}", "references.0.unit: 'tokens/s'"),
        ("{metric: speed, value: 1, unit: x, source: s}", "references.0.metric: unknown metric"),
        (
            "{metric: p_core, value: 1, unit: samples/s, lower: 0.1, source: s}",
            "references.0.lower",
        ),
        ("{metric: p_core, value: 1, unit: samples/s}", "references.0.source"),
        (
            "{metric: p_core, value: 1, unit: samples/s, source: s, hp: {nope: 1}}",
            "references.0.hp.nope: case distilbert-pytorch has no such hyperparameter",
        ),
    ],
)
def test_a_bad_reference_names_the_file_and_field(tmp_path: Path, entry: str, message: str) -> None:
    cases = tmp_path / "cases"
    shutil.copytree(paths.HARNESS_DIR / "distilbert-pytorch", cases / "distilbert-pytorch")
    path = cases / "distilbert-pytorch" / "configs" / "cpu" / "CPUx1x1.yaml"
    path.write_text(f"overrides: {{}}\nreferences:\n  - {entry}\n")
    case = catalog.load_case("distilbert-pytorch", cases)
    with pytest.raises(catalog.CatalogError) as err:
        catalog.load_config(case, "cpu/CPUx1x1")
    assert "CPUx1x1.yaml" in str(err.value) and message in str(err.value)


def test_every_config_reference_loads() -> None:
    counts = {}
    for name in catalog.case_names(paths.HARNESS_DIR):
        case = catalog.load_case(name, paths.HARNESS_DIR)
        for ref in catalog.config_refs(case):
            counts[f"{name} {ref}"] = len(catalog.load_config(case, ref).references)
    assert counts["distilbert-pytorch nvidia/A100x1x1"] == 6
    assert counts["llama2_7b_finetune-pytorch nvidia/A100x1x1"] == 9
    assert counts["llama2_7b-deepspeed kunlunxin/R300x1x8"] == 2


# -- verdicts through the store --------------------------------------------------------


def test_judge_reads_history_from_the_store_and_the_store_keeps_the_verdict(tmp_path: Path) -> None:
    spec = _spec("cpu/CPUx1x1")  # no references: history alone
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        for i, p in enumerate((30.1, 29.4, 30.6)):
            store.add(
                judge(_record(i, spec, accelerator="AMD EPYC", p_core=p, loss=0.6), spec, store)
            )
        assert [c.source for r in store.list() for c in r.verdict.checks] == []
        assert "3 needed" in store.list()[-1].verdict.notes[0]
        quiet = judge(
            _record(10, spec, accelerator="AMD EPYC", p_core=28.9, loss=0.61), spec, store
        )
        assert quiet.verdict.checks and not quiet.verdict.flagged
        busy = judge(_record(11, spec, accelerator="AMD EPYC", p_core=15.2, loss=0.6), spec, store)
        (flag,) = busy.verdict.flagged
        assert flag.metric == "p_core" and flag.source == "history"
        assert "median 30.1 of 3 earlier passed run(s)" in flag.basis
        store.add(busy)
        assert store.get(busy.run_id).verdict == busy.verdict
        failed = _record(12, spec, status="failed", p_core=1.0)
        assert judge(failed, spec, store).verdict is None


@pytest.mark.slow  # real runs through fleetperf --batch
def test_batch_exits_3_on_a_flagged_metric_and_0_without_judging(emitter: Fleetperf) -> None:
    first = emitter.batch("emitter", "cpu/CPUx1x1", "steps=5", "interval_s=0.05")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "FLAGGED" not in first.stdout
    (done,) = [RunRecord(**r) for r in emitter.records()]
    # Three earlier runs of the same case, config and hp, three times as fast.
    with ResultStore(emitter.results / "fleetperf.sqlite") as store:
        for i in range(3):
            fast = {k: v * 3 if k.startswith("p_") and v else v for k, v in done.metrics.items()}
            store.add(
                done.model_copy(
                    update={
                        "run_id": f"{done.run_id}-h{i}",
                        "started": f"2026-01-01T00:00:0{i}Z",
                        "metrics": fast,
                    }
                )
            )
    flagged = emitter.batch("emitter", "cpu/CPUx1x1", "steps=5", "interval_s=0.05")
    assert flagged.returncode == 3, flagged.stdout + flagged.stderr
    lines = [ln for ln in flagged.stdout.splitlines() if ln.startswith("FLAGGED")]
    assert any(" p_core " in ln and "history: median" in ln for ln in lines), lines
    unjudged = emitter.batch(
        "emitter", "cpu/CPUx1x1", "steps=5", "interval_s=0.05", args=("--no-judge",)
    )
    assert unjudged.returncode == 0 and "FLAGGED" not in unjudged.stdout
    verdicts = {r["run_id"]: r["verdict"] for r in emitter.records()}
    assert sum(v is None for v in verdicts.values()) == 1  # the --no-judge run
    assert any(v and any(c["flagged"] for c in v["checks"]) for v in verdicts.values())


def test_the_regression_benchmark_reads_flags_and_counts_false_alarms() -> None:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "regression_detect.py"
    spec = importlib.util.spec_from_file_location("regression_detect", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up there
    spec.loader.exec_module(bench)
    cpu = _spec("cpu/CPUx1x1")
    with_history = [_record(i, cpu, accelerator="AMD EPYC", p_core=30.0) for i in range(3)]
    slow = _record(9, cpu, accelerator="AMD EPYC", p_core=14.0)
    (flag,) = verdict_for(slow, cpu, with_history).flagged
    assert bench.flagged_metrics(f"table\n{flag_line(slow, flag)}\n") == ["p_core"]
    Run = bench.Run
    runs = [Run("warmup", 0, 30.0, 0.1, []) for _ in range(3)]
    runs += [Run("loaded", 3, 14.0, 1.2, ["p_core", "p_whole"])]
    runs += [Run("quiet", 0, 29.0 + i / 10, 0.1, []) for i in range(9)]
    runs += [Run("quiet", 3, 24.0, 0.2, ["p_core"])]
    got = bench.summarize(runs)
    assert got["loaded_caught"] and got["false_alarms"] == 1 and got["quiet_judged"] == 10
    assert got["p_core_median"] == pytest.approx(29.5) and got["loaded_p_core"] == [14.0]
    assert not bench.summarize(runs[:3] + [Run("loaded", 0, 28.0, 1.1, [])])["loaded_caught"]


def test_the_results_screen_shows_the_flag_and_the_band(tmp_path: Path) -> None:
    from app_support import history, make_app, plain, run, wait_for
    from textual.widgets import DataTable, Static

    from tui.app.screens.results import ResultsScreen

    records = history()
    spec = _spec("nvidia/A100x1x8")
    newest = records[-2]  # run-new, after four runs at p_whole 1700..1760 (app_support.py)
    assert newest.run_id == "run-new"
    # 1400 is inside: the band 1730 +- 89 (MAD 20) and 15 % of 1730 past it, to 1381.5
    slower = {**newest.metrics, "p_whole": 1300.0}
    flagged = newest.model_copy(update={"hp": spec.hp, "metrics": slower})
    earlier = [r.model_copy(update={"hp": spec.hp}) for r in records if r.config == "A100x1x8"]
    flagged = flagged.model_copy(update={"verdict": verdict_for(flagged, spec, earlier)})
    assert [c.metric for c in flagged.verdict.flagged] == ["p_whole"]
    with ResultStore(tmp_path / "results" / "fleetperf.sqlite") as store:
        for r in records:
            store.add(flagged if r.run_id == "run-new" else r)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("4")
            screen = app.screen
            assert isinstance(screen, ResultsScreen)
            table = screen.query_one("#history", DataTable)
            await wait_for(pilot, lambda: table.row_count == len(records))
            assert str(table.get_cell("run-new", "status")) == "passed ! p_whole"
            table.focus()
            await pilot.press("space", "down", "space")  # run-new and run-x8
            await pilot.press("d")
            text = plain(screen.query_one("#compare-view", Static), width=160)
            assert "verdict of run-new" in text and "! outside" in text
            assert "history: median 1730.0 of 4 earlier passed" in text, text
            assert ">= 1381.5" in text

    run(scenario())


def test_the_dashboard_line_names_the_configs_throughput_references() -> None:
    from tui.app.screens.dashboard import rate_references

    line = rate_references("distilbert-pytorch", "nvidia/A100x1x8")
    assert line == "reference on A100-SXM4-40GB: p_core 1942.6 samples/s"
    bs96 = rate_references("distilbert-pytorch", "nvidia/A100x1x8-bs96")
    assert bs96 == "reference on A100-SXM4-40GB: p_core 2181.0 samples/s"
    assert rate_references("distilbert-pytorch", "cpu/CPUx1x1") == ""
    assert rate_references("no-such-case", "cpu/CPUx1x1") == ""
