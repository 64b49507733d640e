"""``fleetperf report``: the page's content from a real store, its escaping, that it
fetches nothing, and that headless Chromium renders its charts."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tui.record import RunRecord
from tui.store import ResultStore

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _bench():
    spec = importlib.util.spec_from_file_location(
        "report_scale", REPO / "benchmarks/report_scale.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[RunRecord]]:
    results = tmp_path_factory.mktemp("results")
    records = _bench().build_store(results, 180)  # 30 a series, one slow
    out = results / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli", "report", "--results", str(results), "-o", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out, out.read_text(encoding="utf-8"), records


def test_the_page_has_each_cases_table_throughput_history_and_loss(page) -> None:
    _, text, records = page
    for case in ("distilbert-pytorch", "llama2_7b_finetune-pytorch", "aquila_33b-inference"):
        assert f'id="case-{case.replace("_", "-")}"' in text or f">{case}</h2>" in text
    assert text.count('class="chart chart-throughput"') == 3
    assert text.count('class="chart chart-loss"') == 3
    # The seeds' table: config labels as the seeds write them, and the references drawn.
    assert "A100单机单卡（1x1）" in text and "CPU单机单卡（1x1）" in text
    assert text.count('class="ref"') >= 3 and "FlagPerf seed 001" in text
    # Every slow run the verdicts flagged is a red point on its metric's history.
    flagged = {(r.run_id, c.metric) for r in records if r.verdict for c in r.verdict.flagged}
    assert flagged and text.count('class="flagged"') == len(flagged)
    # A history band for every judged run after the first MIN_HISTORY of its series.
    assert text.count('class="band"') > 0 and "history" in text


def test_the_page_fetches_nothing(page) -> None:
    _, text, _ = page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text)
    assert "<script" not in text and "@import" not in text and "url(" not in text


def test_strings_from_records_are_escaped(tmp_path: Path) -> None:
    records = _bench().build_store(tmp_path, 12)
    evil = records[-1].model_copy(
        update={"run_id": "x-evil", "environment": {"accelerator": "<script>alert(1)</script>"}}
    )
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        store.add(evil)
    out = tmp_path / "r.html"
    from tui.cli import main

    assert (
        main(["report", "--results", str(tmp_path), "-o", str(out), "--since", "2026-01-01"]) == 0
    )
    text = out.read_text(encoding="utf-8")
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_since_and_case_filter_and_bad_input(tmp_path: Path, capsys) -> None:
    from tui.cli import main

    _bench().build_store(tmp_path, 30)
    out = tmp_path / "r.html"
    args = ["report", "--results", str(tmp_path), "-o", str(out)]
    assert main([*args, "--case", "aquila_33b-inference"]) == 0
    text = out.read_text(encoding="utf-8")
    assert ">aquila_33b-inference</h2>" in text and ">distilbert-pytorch</h2>" not in text
    assert main([*args, "--since", "2030-01-01"]) == 0
    assert "No runs match." in out.read_text(encoding="utf-8")
    assert main([*args, "--case", "nope"]) == 2
    assert main([*args, "--since", "last week"]) == 2
    assert "--since 'last week'" in capsys.readouterr().err


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_headless_chromium_renders_the_charts(page) -> None:
    path, _, _ = page
    with tempfile.TemporaryDirectory(prefix="fleetperf-chromium-") as profile:
        argv = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            path.as_uri(),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        shot = Path(profile) / "page.png"
        subprocess.run(
            [*argv[:-2], "--window-size=1100,2400", f"--screenshot={shot}", path.as_uri()],
            capture_output=True,
            timeout=120,
            check=False,
        )
        png = shot.read_bytes() if shot.exists() else b""
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    # The DOM Chromium built holds the SVG charts as elements, with their marks.
    assert len(re.findall(r"<svg[^>]*class=\"chart ", dom)) >= 10
    assert "<circle" in dom and "<polyline" in dom and 'class="flagged"' in dom
    assert png.startswith(b"\x89PNG") and len(png) > 20_000  # a page with charts drawn
