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
from conftest import REPO
from seed_records import distilbert

from tui.results.record import RunRecord
from tui.results.report_charts import PAD_L
from tui.results.store import ResultStore

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _chromium(profile: str) -> list[str]:
    """Headless Chromium with its own profile, reaching for nothing on the network."""
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
    ]


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
    # Fonts are the reader's own: a CJK-capable stack by name, no web font.
    assert "@font-face" not in text
    assert '"Noto Sans CJK SC"' in text and '"WenQuanYi Micro Hei"' in text


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


@pytest.mark.slow  # headless chromium
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_headless_chromium_renders_the_charts(page) -> None:
    path, _, _ = page
    with tempfile.TemporaryDirectory(prefix="fleetperf-chromium-") as profile:
        argv = [*_chromium(profile), "--dump-dom", path.as_uri()]
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


NO_FONT_HAS = "\U0003fffd", "\U0003fffc"  # unassigned; break lines as ideographs (UAX 14: ID)


@pytest.mark.slow  # headless chromium
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_chromium_draws_the_seed_labels_glyphs(page, tmp_path: Path) -> None:
    """Each Han character of the seeds' labels ("CPU单机单卡（1x1）") is drawn in the report's
    screenshot as a glyph of its own, not as a missing-glyph box.

    A character no installed font has is drawn as the font's .notdef box, the same box for
    every such character. So the page's screenshot is compared with the screenshot of the
    page where one of the labels' characters is replaced, in the labels only, by a code
    point that no font has and that breaks lines as an ideograph does (the layout stays):
    the same pixels, hence the same PNG bytes, exactly when that character was a box too.
    This fails where no CJK font is installed (scripts/bootstrap installs
    fonts-wqy-microhei). Two checks keep it from passing by accident: the page shot twice
    gives the same bytes (a difference is the glyph, never noise), and two different such
    code points give the same bytes (the replacement really is drawn as the box)."""
    _, text, _ = page
    # The configs' labels as the seeds write them: Han characters, then "（1x1）".
    labels = sorted(set(re.findall(r"<td>([^<]*[\u4e00-\u9fff][^<]*（\d+x\d+）)</td>", text)))
    assert "CPU单机单卡（1x1）" in labels, labels
    chars = sorted({c for label in labels for c in label if "\u4e00" <= c <= "\u9fff"})

    def shot(name: str, old: str, new: str) -> bytes:
        """The screenshot of the page with ``old`` replaced by ``new`` in the labels."""
        html = text
        for label in labels:
            html = html.replace(f"<td>{label}</td>", f"<td>{label.replace(old, new)}</td>")
        page_path, png = tmp_path / f"{name}.html", tmp_path / f"{name}.png"
        page_path.write_text(html, encoding="utf-8")
        with tempfile.TemporaryDirectory(prefix="fleetperf-chromium-") as profile:
            subprocess.run(
                [*_chromium(profile), "--hide-scrollbars", "--window-size=1100,800"]
                + [f"--screenshot={png}", page_path.as_uri()],
                capture_output=True,
                timeout=120,
                check=False,
            )
        assert png.exists(), f"Chromium wrote no screenshot of {page_path}"
        return png.read_bytes()

    report = shot("report", "", "")  # kept as report.png under the test's tmp dir, to look at
    assert report == shot("again", "", ""), "the same page shot twice differs"
    box = shot("box", chars[0], NO_FONT_HAS[0])
    assert box == shot("box2", chars[0], NO_FONT_HAS[1]), "a code point no font has drew a glyph"
    without = {chars[0]: box} | {c: shot(f"u{ord(c):x}", c, NO_FONT_HAS[0]) for c in chars[1:]}
    boxes = [c for c in chars if without[c] == report]
    assert not boxes, f"drawn as missing glyphs: {boxes} (no CJK font? see `fc-list :lang=zh`)"


# -- the charts' axes (issue 29 point 10) ----------------------------------------------

LONG_HP = {
    "train_batch_size": 8,
    "gradient_accumulation_steps": 4,
    "learning_rate": 1e-05,
    "max_samples_termination": 24135,
    "eval_interval_samples": 24135,
    "max_seq_length": 512,
    "warmup_proportion": 0.1,
}


def _same_day_series(results: Path) -> None:
    """Seven runs of one series an hour apart on one day: acc spread wide (its band runs
    past 0 and 1), memory within 0.80-0.82 GiB, p_whole near 1800 samples/s."""
    accs = [0.55, 0.95, 0.6, 0.98, 0.5, 0.97, 0.58]
    with ResultStore(results / "fleetperf.sqlite") as store:
        for i, acc in enumerate(accs):
            mem = 0.80 + 0.01 * (i % 3)
            store.add(
                distilbert(
                    f"r{i}",
                    "A100x1x1",
                    LONG_HP,
                    (300.0 + i, 1800.0 + i, 1850.0, 1900.0, acc, mem),
                    started=f"2026-11-21T{10 + i:02d}:00:00Z",
                    finished=f"2026-11-21T{10 + i:02d}:20:00Z",
                )
            )


def _charts(html: str) -> dict[str, str]:
    """aria-label -> the chart's SVG."""
    return {
        m.group(1): m.group(0)
        for m in re.finditer(r'<svg class="chart [^"]*"[^>]*aria-label="([^"]*)".*?</svg>', html)
    }


def _labels(svg: str, anchor: str) -> list[str]:
    """The tick labels of an axis: y's are anchored at the end left of the plot, the bars'
    x in the middle."""
    x = f"{PAD_L - 4}" if anchor == "end" else r"[\d.]+"
    return re.findall(rf'<text x="{x}" y="[\d.]+" text-anchor="{anchor}">([^<]*)</text>', svg)


def _sig_digits(label: str) -> int:
    return len(label.replace("-", "").replace(".", "").lstrip("0")) or 1


def _check_axes(html: str) -> None:
    charts = _charts(html)
    acc = [float(t) for t in _labels(charts["acc history"], "end")]
    assert min(acc) >= 0.0 and max(acc) <= 1.0, acc  # a fraction's axis stays in 0-1
    mem = _labels(charts["mem_used_gib history"], "end")
    assert len(set(mem)) == len(mem) >= 3, mem  # neighbouring ticks never read alike
    for name in ("acc history", "mem_used_gib history", "p_whole history"):
        ticks = _labels(charts[name], "end")
        top = max(ticks, key=lambda t: abs(float(t)))
        assert _sig_digits(top) >= 3 and len(set(ticks)) == len(ticks), (name, ticks)
        assert min(float(t) for t in ticks) >= 0, (name, ticks)  # non-negative data
    bars = _labels(charts["p_core per config"], "middle")
    assert bars[0] == "0" and all(float(t) >= 0 for t in bars), bars  # bars from 0
    # One day of runs: the x labels carry the hour, not the same date twice.
    assert ">2026-11-21 10:00 UTC</text>" in charts["acc history"]
    assert ">16:00 UTC</text>" in charts["acc history"]


def test_axes_read_from_the_datas_range(tmp_path: Path) -> None:
    from tui.cli import main

    _same_day_series(tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", "--results", str(tmp_path), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    _check_axes(html)
    # The long fix_hp may wrap after each comma, within the page.
    assert "bs=8,<wbr>gradient_accumulation_steps=4,<wbr>" in html


@pytest.mark.slow  # headless chromium
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_chromium_reads_the_axis_labels(tmp_path: Path) -> None:
    """The labels as the browser parsed the page (its DOM), and a screenshot of it (kept
    under the test's tmp dir as report.png, to look at)."""
    _same_day_series(tmp_path)
    page = tmp_path / "r.html"
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli", "report", "--results", str(tmp_path), "-o", str(page)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shot = tmp_path / "report.png"
    with tempfile.TemporaryDirectory(prefix="fleetperf-chromium-") as profile:
        argv = _chromium(profile)
        dom = subprocess.run(
            [*argv, "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        subprocess.run(
            [*argv, "--window-size=1100,2000", f"--screenshot={shot}", page.as_uri()],
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert dom.returncode == 0, dom.stderr[-2000:]
    _check_axes(dom.stdout)
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20_000
