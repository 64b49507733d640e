"""History verdicts with qualification's statistics (issue 42, "The same statistics for
history verdicts"): a run is flagged only past the earlier runs' band by more than the
floor, and runs are told busy from quiet by what other processes used during them (the
record's monitoring), older records by their load at launch (tui/results/references.py)."""

from __future__ import annotations

from harness.metrics import METRICS

from tui.catalog import catalog
from tui.core import paths
from tui.results.intervals import side
from tui.results.record import RunRecord
from tui.results.references import busy, history_band, history_of, tolerance, verdict_for

CPU = "AMD EPYC 7B13"


def _spec() -> catalog.RunSpec:
    case = catalog.load_case("distilbert-pytorch", paths.HARNESS_DIR)
    return catalog.resolve(case, catalog.load_config(case, "cpu/CPUx1x1"), None)


def _run(i: int, e2e_time: float, p_whole: float, **update: object) -> RunRecord:
    spec = _spec()
    record = RunRecord(
        run_id=f"20261129-{i:06d}-distilbert-pytorch-{i:04x}",
        case=spec.case.name,
        vendor=spec.config.vendor,
        config=spec.config.name,
        status="passed",
        started=f"2026-11-29T05:{i // 60 % 60:02d}:{i % 60:02d}Z",
        hp=spec.hp,
        fix_hp=spec.seed_fix_hp,
        metrics={"e2e_time": e2e_time, "p_whole": p_whole},
        environment={"accelerator": CPU},
        synthetic_data=False,
    )
    return record.model_copy(update=update)


def _flagged(new: RunRecord, earlier: list[RunRecord]) -> list[str]:
    return [c.metric for c in verdict_for(new, _spec(), earlier).flagged]


def test_three_noisy_runs_do_not_flag_a_7_second_run() -> None:
    """The issue's case: e2e_time 7.0 s after three runs of about 5.3 s with spread, p_whole
    24 % down. Before, the band was max(3 MADs, 25 %) from the median: 7.0 > 6.63, flagged
    (and p_whole below 82.2). Now it is 3 MADs and the floor past them."""
    earlier = [_run(1, 5.0, 100.0), _run(2, 5.3, 96.0), _run(3, 5.6, 104.0)]
    new = _run(4, 7.0, 76.0)
    assert _flagged(new, earlier) == []
    verdict = verdict_for(new, _spec(), earlier)
    assert {c.metric for c in verdict.checks} >= {"e2e_time", "p_whole"}  # judged, not skipped


def test_a_real_regression_with_enough_runs_is_flagged() -> None:
    earlier = [_run(i, 5.3 + (i % 3 - 1) * 0.1, 100.0 + i % 3 - 1) for i in range(1, 11)]
    assert _flagged(_run(20, 5.4, 99.0), earlier) == []  # inside the noise
    assert sorted(_flagged(_run(21, 9.0, 60.0), earlier)) == ["e2e_time", "p_whole"]


def test_the_band_is_qualifications_rule() -> None:
    """history_band's bound is where intervals.side (judge.outside's rule) starts to say
    "outside by more than the floor": just inside is not flagged, just past it is."""
    values = [100.0, 97.0, 104.0, 99.0, 101.0]
    metric = METRICS["p_whole"]
    low, high, median, half = history_band(values, metric)
    assert high is None and low == median - half
    noise = half - tolerance("p_whole") * median
    band = (median - noise, median + noise)
    floor = tolerance("p_whole") * 100
    assert side((low + 1e-6, low + 1e-6), band, floor) == 0
    assert side((low - 1e-6, low - 1e-6), band, floor) == -1


def test_busy_is_what_others_used_during_the_run_and_old_records_keep_their_load() -> None:
    """A run whose measured window was quiet is quiet even when the load average read at
    launch was high (0.85-0.91 just after other work); one whose window was busy is busy
    however low that load; a record without the measurement is classified by its load."""
    quiet_window = {"hosts": [], "notes": [], "busy": None, "throttle": None}
    busy_window = {**quiet_window, "busy": "busy: host h: other processes used 1.00 of 2 CPUs"}
    after_other_work = _run(1, 5.3, 100.0, load_per_cpu=0.91, monitoring=quiet_window)
    neighbour = _run(2, 5.3, 100.0, load_per_cpu=0.05, monitoring=busy_window)
    old_loaded = _run(3, 5.3, 100.0, load_per_cpu=0.85)
    old_quiet = _run(4, 5.3, 100.0, load_per_cpu=0.10)
    assert not busy(after_other_work) and busy(neighbour)
    assert busy(old_loaded) and not busy(old_quiet)
    new = _run(10, 5.3, 100.0, monitoring=quiet_window)
    history = history_of(new, [after_other_work, neighbour, old_loaded, old_quiet])
    assert history == [after_other_work, old_quiet]
    verdict = verdict_for(new, _spec(), [after_other_work, neighbour, old_loaded, old_quiet])
    assert "history: 2 comparable run(s) on a loaded host left out" in verdict.notes
    # Untrusted monitoring (an imported record): a busy that is not text nor null is no
    # measurement, and the load decides.
    odd = _run(5, 5.3, 100.0, load_per_cpu=0.9, monitoring={"busy": 3})
    assert busy(odd)
