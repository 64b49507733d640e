"""Energy per sample and per token (harness.energy): RAPL from a fake powercap tree (with a
counter that wraps), NVML from a fake NVML-like object, null with a note where there is no
counter, and a real Run whose fake RAPL counter moves with its steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from harness.dist import all_reduce  # noqa: E402
from harness.energy import (  # noqa: E402
    Energy,
    EnergyMeter,
    nvml_counter,
    open_meter,
    rapl_counter,
)
from harness.perf import PerfTotals, PerfTracker  # noqa: E402

MAX_UJ = 262_143_328_850  # a real package's max_energy_range_uj


def powercap(root: Path, packages: dict[int, int]) -> Path:
    """A powercap tree as Linux writes it: package zones intel-rapl:N (with sub-zones and
    an MMIO zone that are not packages), counters in microjoules."""
    for n, uj in packages.items():
        zone = root / f"intel-rapl:{n}"
        zone.mkdir(parents=True)
        (zone / "name").write_text(f"package-{n}\n")
        (zone / "energy_uj").write_text(f"{uj}\n")
        (zone / "max_energy_range_uj").write_text(f"{MAX_UJ}\n")
        sub = root / f"intel-rapl:{n}:0"  # a part of the package: counted in it already
        sub.mkdir()
        (sub / "name").write_text("core\n")
        (sub / "energy_uj").write_text("999999999\n")
        (sub / "max_energy_range_uj").write_text(f"{MAX_UJ}\n")
    mmio = root / "intel-rapl-mmio:0"
    mmio.mkdir(parents=True)
    (mmio / "name").write_text("package-0\n")
    (mmio / "energy_uj").write_text("5\n")
    return root


def set_uj(root: Path, n: int, uj: int) -> None:
    (root / f"intel-rapl:{n}" / "energy_uj").write_text(f"{uj}\n")


def test_rapl_package_domains_and_a_wrap(tmp_path: Path) -> None:
    """Two packages over a window with warm-up and an evaluation: package 1 wraps at its
    max_energy_range_uj; the warm-up and the evaluation are left out."""
    root = powercap(tmp_path / "powercap", {0: 1_000_000, 1: MAX_UJ - 2_000_000})
    counter, why = rapl_counter(root)
    assert counter is not None and why == ""
    assert [p.parent.name for p in counter.energy_files] == ["intel-rapl:0", "intel-rapl:1"]
    meter = EnergyMeter(counter)
    tracker = PerfTracker(warmup_steps=1)
    tracker.train_begin()
    meter.follow(tracker)  # still in warm-up: not counting
    tracker.step_begin()
    set_uj(root, 0, 50_000_000)  # the warm-up step's 49 J: left out
    tracker.step_end(4)
    meter.follow(tracker)  # the counted window opens here
    set_uj(root, 0, 53_000_000)  # +3 J
    set_uj(root, 1, 1_000_000)  # +2 J to the top, wrapped, +1 J: +3 J
    with meter.paused():  # an evaluation: its 100 J are not the samples'
        set_uj(root, 0, 153_000_000)
    set_uj(root, 0, 154_000_000)  # +1 J after it
    meter.end()
    assert meter.joules == pytest.approx(7.0)
    energy = meter.total(all_reduce)
    assert energy.joules == pytest.approx(7.0) and "RAPL CPU package" in energy.source


def test_no_powercap_or_one_only_root_may_read_is_null_with_why(tmp_path: Path) -> None:
    assert rapl_counter(tmp_path / "absent") == (
        None,
        f"no RAPL package domain under {tmp_path / 'absent'}",
    )
    root = powercap(tmp_path / "powercap", {0: 1})
    (root / "intel-rapl:0" / "energy_uj").unlink()
    (root / "intel-rapl:0" / "energy_uj").mkdir()  # unreadable as a file
    counter, why = rapl_counter(root)
    assert counter is None and why.startswith(f"RAPL under {root} unreadable (")
    if os.geteuid() != 0:  # root reads a file whatever its mode
        (root / "intel-rapl:0" / "energy_uj").rmdir()
        (root / "intel-rapl:0" / "energy_uj").write_text("1\n")
        (root / "intel-rapl:0" / "energy_uj").chmod(0o000)
        assert "readable by root only" in rapl_counter(root)[1]
    meter = EnergyMeter(*rapl_counter(tmp_path / "absent"))
    meter.follow(PerfTracker())
    meter.end()
    assert meter.total(all_reduce) == Energy(
        None, f"no RAPL package domain under {tmp_path}/absent"
    )


class FakeNvml:
    """What pynvml offers for energy: handles by index, total energy in millijoules."""

    def __init__(self, mj: dict[int, int], supported: bool = True) -> None:
        self.mj, self.supported = mj, supported

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802 (pynvml's names)
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:  # noqa: N802
        if not self.supported:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return self.mj[handle]


def test_nvml_total_energy_in_millijoules() -> None:
    nvml = FakeNvml({0: 10_000, 1: 5_000_000_000_000})  # a counter far past 32 bits
    counter, why = nvml_counter(1, nvml)
    assert counter is not None and why == ""
    meter = EnergyMeter(counter)
    meter.follow(PerfTracker())  # no warm-up: counting from train_begin
    nvml.mj[1] += 250_500  # 250.5 J
    meter.end()
    energy = meter.total(all_reduce)
    assert energy.joules == pytest.approx(250.5) and "NVML GPU board" in energy.source
    none, why = nvml_counter(0, FakeNvml({0: 1}, supported=False))
    assert none is None and why == (
        "NVML has no total-energy counter for device 0 (NVML_ERROR_NOT_SUPPORTED)"
    )


def test_the_run_total_is_null_when_any_rank_that_owns_devices_has_no_counter() -> None:
    counted = EnergyMeter(None, "why not", owns=False)  # another local rank of a RAPL host
    assert counted.total(lambda v: [v[0] + 7.0, v[1]]) == Energy(7.0, "")

    class Fixed:
        what = "fixed"

        def read(self) -> list[int]:
            return [0]

        def joules(self, before: list[int], after: list[int]) -> float:
            return 2.0

    meter = EnergyMeter(Fixed())
    meter.follow(PerfTracker())
    meter.end()
    other_rank_lacks_one = meter.total(lambda v: [v[0] + 0.0, v[1] + 1.0])
    assert other_rank_lacks_one == Energy(None, "1 rank(s) have no counter")


def test_energy_metrics_and_notes_in_the_result(tmp_path: Path) -> None:
    import torch
    from harness.result import _energy_metrics, _energy_note

    totals = PerfTotals(samples=40, tokens=2000)
    assert _energy_metrics(Energy(80.0, "x"), totals) == {
        "energy_j_per_sample": 2.0,
        "energy_j_per_token": 0.04,
    }
    assert _energy_metrics(Energy(80.0, "x"), PerfTotals(samples=40)) == {
        "energy_j_per_sample": 2.0,
        "energy_j_per_token": None,  # no tokens counted
    }
    assert _energy_metrics(Energy(None, "why"), totals) == {
        "energy_j_per_sample": None,
        "energy_j_per_token": None,
    }
    assert _energy_note(Energy(None, "no RAPL")) == "energy null: no RAPL"
    assert _energy_note(Energy(80.0, "RAPL")).startswith("energy: 80 J over the counted window")
    for name in ("energy_j_per_sample", "energy_j_per_token"):
        metric = harness.METRICS[name]
        assert metric.higher_is_better is False and metric.unit.startswith("J/")
    # This host's meter: local rank 0 of a CPU host reads RAPL; the others own nothing.
    device = harness.open_device("cpu", "fp32")
    try:
        root = powercap(tmp_path / "powercap", {0: 1})
        assert open_meter(device, 0, root).counter is not None
        assert open_meter(device, 1, root).owns is False
        assert open_meter(device, 0, tmp_path / "none").counter is None
    finally:
        torch.set_flush_denormal(False)


CASE_YAML = """\
name: energycase
model: linear
dataset: random
task: test
kind: training
entrypoint: run.py
report: [p_train]
defaults:
  precision: fp32
  train_batch_size: 4
  learning_rate: 0.01
  max_samples: 40
  eval_every_samples: 20
  warmup_steps: 2
  seed: 1
"""
# Each step "uses" 1 J of a fake RAPL package (written from inside the step, as the hardware
# would count it), each evaluation 100 J, and the counter wraps during the run.
RUN_PY = """\
import os, sys
from pathlib import Path
import harness, harness.energy, torch

harness.energy.POWERCAP = Path(os.environ["FAKE_POWERCAP"])
COUNTER = harness.energy.POWERCAP / "intel-rapl:0" / "energy_uj"


def burn(joules):
    top = int((COUNTER.parent / "max_energy_range_uj").read_text())
    COUNTER.write_text(str((int(COUNTER.read_text()) + int(joules * 1e6)) % top))


def main(run):
    weight = torch.nn.Parameter(torch.zeros(8, 8))
    opt = torch.optim.SGD([weight], lr=run.hp.learning_rate)
    batches = [torch.randn(run.hp.train_batch_size, 8) for _ in range(4)]

    def evaluate():
        burn(100)
        return {"acc": 1.0}

    for x in run.train(batches, evaluate=evaluate):
        with run.step(len(x), tokens=len(x) * 5) as step:
            step.loss = (x @ weight).pow(2).mean() + 1.0
            run.optimize(step.loss, opt)
            burn(1)
    run.finish(harness.ModelFlops(6 * 64))


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
"""


@pytest.mark.slow  # a real harness run
def test_a_run_counts_the_energy_of_its_counted_samples(tmp_path: Path) -> None:
    """10 steps of 4 samples, 2 of them warm-up, an evaluation every 20 samples: 8 J for
    32 samples (160 tokens), whatever the warm-up and the evaluations burnt, across a wrap."""
    case = tmp_path / "cases" / "energycase"
    case.mkdir(parents=True)
    (case / "case.yaml").write_text(CASE_YAML)
    (case / "run.py").write_text(RUN_PY)
    data = tmp_path / "data" / "energycase"
    data.mkdir(parents=True)
    root = powercap(tmp_path / "powercap", {0: MAX_UJ - 5_500_000})  # wraps at step 6
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    hp = yaml.safe_load(CASE_YAML)["defaults"]
    config = {"vendor": "cpu", "chip": "CPU", "precision": "fp32", "hp": hp}
    (run_dir / "config.json").write_text(json.dumps(config))
    argv = [sys.executable, str(case / "run.py"), "--config", str(run_dir / "config.json")]
    proc = subprocess.run(
        [*argv, "--data-dir", str(data), "--run-dir", str(run_dir)],
        env={
            **os.environ,
            "PYTHONPATH": str(REPO / "cases"),
            "OMP_NUM_THREADS": "1",
            "FAKE_POWERCAP": str(root),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    (result,) = [x for x in lines if x["kind"] == "result"]
    assert len([x for x in lines if x["kind"] == "eval"]) == 2
    m = result["metrics"]
    assert m["energy_j_per_sample"] == pytest.approx(8.0 / 32)
    assert m["energy_j_per_token"] == pytest.approx(8.0 / 160)
    assert any(n.startswith("energy: 8 J over the counted window") for n in result["notes"])
