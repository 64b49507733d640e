"""PerfTracker on a controlled clock: warm-up, data loading, evaluation, two ranks.

Every figure below is worked out by hand from the timeline in ``_rank``; the tracker must
reproduce it exactly.
"""

from __future__ import annotations

import os
import sys
import time

import pytest
from conftest import REPO
from fake_clock import FakeClock

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from harness.perf import PerfTotals, PerfTracker, merge_totals, throughput_notes  # noqa: E402

BATCH, TOKENS, SEQ = 8, 100, 64  # samples, real tokens and padded length of every step


def _rank(load: float, wait: float, compute: float) -> tuple[PerfTracker, FakeClock, list[str]]:
    """Six steps, the first two warm-up (1.0 s of compute each, then ``compute``); each step
    loads its batch for ``load`` s and waits ``wait`` s at the barrier for the other rank;
    a 1.5 s evaluation after step 1 (during warm-up) and a 2.0 s one after step 4."""
    clock, calls = FakeClock(), []

    def sync() -> None:
        calls.append("sync")

    def barrier() -> None:
        calls.append("barrier")
        clock.advance(wait)

    perf = PerfTracker(2, sync, barrier, start_time=0.0, clock=clock)
    perf.train_begin()
    for step in range(1, 7):
        clock.advance(load)
        perf.step_begin()
        clock.advance(1.0 if step <= 2 else compute)
        perf.step_end(BATCH, TOKENS, BATCH * SEQ)
        if step in (1, 4):
            with perf.evaluating():
                clock.advance(1.5 if step == 1 else 2.0)
    perf.train_end()
    return perf, clock, calls


def test_one_rank_by_hand():
    # rank 0: loads in 0.1 s, waits 0.2 s for rank 1 before each step, computes in 0.5 s.
    # t: 0.1 load, 0.3 barrier, 1.3 step 1, 2.8 eval; 2.9, 3.1, 4.1 step 2 = window start;
    # steps 3..6 each take 0.1 + 0.2 + 0.5 = 0.8 s, plus the 2.0 s eval: end 4.1 + 3.2 + 2.0
    perf, clock, calls = _rank(load=0.1, wait=0.2, compute=0.5)
    assert clock.now == pytest.approx(9.3)
    tot = perf.totals()
    assert tot.whole_time == pytest.approx(9.3 - 4.1)
    assert tot.eval_time == pytest.approx(2.0)  # the warm-up's evaluation is outside
    assert tot.train_time == pytest.approx(3.2)
    assert tot.compute_time == pytest.approx(4 * 0.5)  # the barrier waits are not compute
    assert (tot.samples, tot.tokens, tot.padded_tokens) == (32, 400, 32 * SEQ)
    assert (tot.steps, tot.warmup_steps, tot.warmup_samples) == (6, 2, 16)
    assert tot.warmup_time == pytest.approx(2.0)
    m = harness.throughput_metrics(tot)
    assert m["p_whole"] == pytest.approx(32 / 5.2)
    assert m["p_train"] == pytest.approx(32 / 3.2)
    assert m["p_core"] == pytest.approx(32 / 2.0)
    assert m["tokens_per_s_per_device"] == pytest.approx(400 / 3.2)
    assert m["warmup_samples"] == 16
    # the device is synchronised at the train bounds, both bounds of every step and of each
    # evaluation; the barrier comes after the sync that opens a step
    assert calls.count("sync") == 2 + 2 * 6 + 2 * 2 and calls.count("barrier") == 6
    assert calls[1:3] == ["sync", "barrier"]


def test_two_ranks_by_hand():
    # rank 1: loads in 0.3 s, never waits, computes in 0.6 s after warm-up.
    # t: 0.3, 1.3 step 1, 2.8 eval; 3.1, 4.1 step 2 = window start; steps 3..6 take 0.9 s
    # each, plus the 2.0 s eval: end 4.1 + 3.6 + 2.0 = 9.7
    rank0 = _rank(load=0.1, wait=0.2, compute=0.5)[0].totals()
    rank1 = _rank(load=0.3, wait=0.0, compute=0.6)[0].totals()
    assert rank1.whole_time == pytest.approx(5.6) and rank1.train_time == pytest.approx(3.6)
    tot = merge_totals([rank0, rank1])
    assert (tot.samples, tot.tokens, tot.padded_tokens, tot.warmup_samples) == (
        64,
        800,
        64 * SEQ,
        32,
    )
    # times: the slowest rank's, train time taken per rank first
    assert tot.whole_time == pytest.approx(5.6)
    assert tot.train_time == pytest.approx(3.6)
    assert tot.compute_time == pytest.approx(2.4)
    m = harness.throughput_metrics(tot, world_size=2)
    assert m == {
        "p_whole": pytest.approx(64 / 5.6),
        "p_train": pytest.approx(64 / 3.6),
        "p_core": pytest.approx(64 / 2.4),
        "tokens_per_s_per_device": pytest.approx(800 / 3.6 / 2),
        "warmup_samples": 32,
    }
    assert m["p_core"] >= m["p_train"] >= m["p_whole"]


def test_train_time_is_per_rank_then_the_slowest():
    # rank a evaluates long, rank b trains long: whole - eval per rank is 3.0 and 4.0, the
    # run's train time is 4.0 (subtracting the slowest eval from the slowest window gives 2)
    a = PerfTotals(samples=10, whole_time=6.0, eval_time=3.0, train_time=3.0, compute_time=1)
    b = PerfTotals(samples=10, whole_time=5.0, eval_time=1.0, train_time=4.0, compute_time=1)
    assert merge_totals([a, b]).train_time == 4.0


def test_without_warmup_the_window_starts_at_train_begin():
    clock = FakeClock()
    perf = PerfTracker(0, clock=clock, start_time=0.0)
    clock.advance(5.0)  # before train_begin: not counted
    perf.train_begin()
    clock.advance(0.5)
    perf.step_begin()
    clock.advance(1.0)
    perf.step_end(4)
    perf.train_end()
    tot = perf.totals()
    assert (tot.whole_time, tot.train_time, tot.compute_time, tot.samples) == (1.5, 1.5, 1.0, 4)


def test_all_warmup_leaves_the_rates_unknown_and_says_why():
    clock = FakeClock()
    perf = PerfTracker(3, clock=clock)
    perf.train_begin()
    for _ in range(2):
        perf.step_begin()
        clock.advance(1.0)
        perf.step_end(8)
    perf.train_end()
    tot = perf.totals()
    m = harness.throughput_metrics(tot)
    assert (m["p_whole"], m["p_train"], m["p_core"]) == (None, None, None)
    assert m["warmup_samples"] == 16
    (note,) = throughput_notes(tot)
    assert "all 2 steps were warm-up steps" in note


def test_reduce_totals_is_merge_for_one_process():
    tot = _rank(load=0.1, wait=0.0, compute=0.5)[0].totals()
    assert harness.reduce_totals(tot) == merge_totals([tot]) == tot


# ----------------------------------------------------------------- edges of the timeline
def test_process_age_is_the_kernels_start_time(tmp_path):
    psutil = pytest.importorskip("psutil")
    started = psutil.Process().create_time()
    assert harness.perf.process_start_time() == pytest.approx(started, abs=1.0)  # btime: whole s
    fake_stat = tmp_path / "stat"
    # pid (comm with ") " inside) state ppid ... : starttime is field 22, here 500 ticks
    fake_stat.write_text("42 (a) b) S " + " ".join(["0"] * 18) + " 500 0 0\n")
    uptime = tmp_path / "uptime"
    uptime.write_text("12.50 99.0\n")
    ticks = os.sysconf("SC_CLK_TCK")
    assert harness.perf.process_age_s(str(fake_stat), str(uptime)) == pytest.approx(
        max(0.0, 12.5 - 500 / ticks)
    )
    uptime.write_text(f"{500 / ticks + 0.25} 1.0\n")
    assert harness.perf.process_age_s(str(fake_stat), str(uptime)) == pytest.approx(0.25)
    uptime.write_text(f"{500 / ticks - 3} 1.0\n")  # clocks disagree: never a negative age
    assert harness.perf.process_age_s(str(fake_stat), str(uptime)) == 0.0


def test_process_age_unknown_where_proc_cannot_tell(tmp_path):
    stat, uptime = tmp_path / "stat", tmp_path / "uptime"
    uptime.write_text("12.5 1.0\n")
    assert harness.perf.process_age_s(str(tmp_path / "none"), str(uptime)) is None  # OSError
    stat.write_text("42 (a) S 1 2\n")
    assert harness.perf.process_age_s(str(stat), str(uptime)) is None  # IndexError
    stat.write_text("42 (a) S " + " ".join(["x"] * 20) + "\n")
    assert harness.perf.process_age_s(str(stat), str(uptime)) is None  # ValueError


def test_e2e_time_counts_from_the_given_start():
    perf = PerfTracker(start_time=time.time() - 3.0)
    assert perf.e2e_time() == pytest.approx(3.0, abs=0.05)


def test_defaults_count_every_step_and_no_tokens():
    clock = FakeClock()
    perf = PerfTracker(clock=clock, start_time=0.0)
    assert perf.totals() == PerfTotals() and all(v == 0 for v in PerfTotals().as_dict().values())
    assert not perf.in_warmup
    perf.train_begin()
    perf.step_begin()
    clock.advance(0.5)
    perf.step_end(4)
    clock.advance(0.5)
    tot = perf.totals()  # no train_end yet: the window runs to now
    assert (tot.samples, tot.tokens, tot.padded_tokens, tot.warmup_steps) == (4, 0, 0, 0)
    assert (tot.whole_time, tot.train_time, tot.compute_time) == (1.0, 1.0, 0.5)
    perf.train_end()
    clock.advance(5.0)
    assert perf.totals().whole_time == 1.0  # ended: later time is not the run's


def test_in_warmup_until_the_last_warmup_step_ends():
    perf = PerfTracker(2, clock=FakeClock(), start_time=0.0)
    seen = []
    for _ in range(3):
        seen.append(perf.in_warmup)
        perf.step_begin()
        perf.step_end(1)
    assert seen + [perf.in_warmup] == [True, True, False, False]


def test_rates_are_unknown_without_samples_or_time_and_exact_otherwise():
    rates = harness.throughput_metrics
    assert rates(PerfTotals(samples=0, whole_time=5.0))["p_whole"] is None
    assert rates(PerfTotals(samples=5, whole_time=0.0))["p_whole"] is None
    got = rates(PerfTotals(samples=1, tokens=1, whole_time=0.5, train_time=0.5, compute_time=0.25))
    assert (got["p_whole"], got["p_train"], got["p_core"]) == (2.0, 2.0, 4.0)
    assert got["tokens_per_s_per_device"] == 2.0  # one device unless told
    assert rates(PerfTotals(tokens=8, train_time=1.0), 4)["tokens_per_s_per_device"] == 2.0
