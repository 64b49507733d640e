"""Each run's covariates (issue 42 part D): what other processes used of the CPUs during the
run's window, read from a real /proc with real processes (cases/harness/procwindow.py), the
sys event's bounded ``others`` (tui/core/events.py), and the busy and throttle reasons of
the monitoring summary (tui/results/monitoring.py).

The /proc tests run in a pid namespace of their own (``unshare --pid --mount-proc``): its
/proc shows only the test's processes, so the other engineers' work on this shared host is
not "other processes" of the run measured there; the namespace's end kills whatever is
left in it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness import nvml
from harness.procwindow import ProcWindow, cpu_freq_mhz, run_root
from harness.smi import smi_readings
from harness.sysmon import SysSampler

from tui.core.events import MAX_OTHERS, SysSample, parse
from tui.results.monitoring import BUSY_FRACTION, Monitor

HARNESS = str(Path(__file__).resolve().parents[2] / "cases")
SPIN_S = 20  # a spinner's own limit, should the namespace outlive the test
# Sets its name (comm) so the verdict can be read for it, then spins.
SPIN = (
    "open('/proc/self/comm', 'w').write('fp-spinner')\n"
    f"import time\nend = time.monotonic() + {SPIN_S}\nwhile time.monotonic() < end: pass\n"
)
# The run: its window over 1.5 s of sleep, and a child of its own spinning in it ("own").
RUN = """
import json, subprocess, sys, time
sys.path.insert(0, {harness!r})
from harness.procwindow import ProcWindow
import os
window = ProcWindow(os.getpid())
child = subprocess.Popen([sys.executable, "-c", {spin!r}]) if sys.argv[1] == "own" else None
time.sleep(1.5)
if child:
    child.kill()
    child.wait()
print(json.dumps(window.figures()))
"""
# The namespace's first process: neighbours before or during the run, then the run.
DRIVER = """
import subprocess, sys, time
scenario, n = sys.argv[1], int(sys.argv[2])
n = 0 if scenario == "own" else n
spin = [subprocess.Popen([sys.executable, "-c", {spin!r}]) for _ in range(n)]
if scenario == "after":
    time.sleep(1.5)
    for p in spin:
        p.kill()
        p.wait()
argv = [sys.executable, "-c", {run!r}, scenario]
run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
for p in spin:
    p.kill()
    p.wait()
sys.stdout.write(run.stdout)
sys.stderr.write(run.stderr)
"""


def _namespaces() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    done = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30
    )
    return done.returncode == 0


needs_namespace = pytest.mark.skipif(
    not _namespaces(), reason="unshare --pid --mount-proc not permitted here (needs root)"
)
# Two spinners a CPU (at most 8): busy past BUSY_FRACTION even on a host loaded 20 deep.
NEIGHBOURS = min(2 * (os.cpu_count() or 1), 8)


def _window(scenario: str) -> dict:
    run = RUN.format(harness=HARNESS, spin=SPIN)
    driver = DRIVER.format(spin=SPIN, run=run)
    argv = [sys.executable, "-c", driver, scenario, str(NEIGHBOURS)]
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", *argv],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _summary(figures: dict) -> dict:
    """The monitoring summary of a run whose last sys sample carried ``figures``."""
    line = json.dumps({"t": 1.0, "kind": "sys", "rank": 0, "cpu_percent": 5.0, **figures})
    ev = parse("run-1", "h", line)
    assert isinstance(ev, SysSample)
    monitor = Monitor("cpu", 1)
    monitor.add(ev)
    return monitor.summary()


@needs_namespace
def test_a_run_just_after_a_cpu_heavy_process_ended_is_quiet() -> None:
    """The load average read at launch would still count the spinners (it lags by a
    minute); the window does not: they ended before it began."""
    figures = _window("after")
    assert figures["window_s"] >= 1.4
    assert not [p for p in figures["others"] if p["name"] == "fp-spinner"]
    assert figures["others_cpu_s"] / figures["window_s"] / figures["host_cpus"] < BUSY_FRACTION
    assert _summary(figures)["busy"] is None


@needs_namespace
def test_a_run_with_a_cpu_heavy_neighbour_during_it_is_busy_and_names_it() -> None:
    figures = _window("during")
    spinners = [p for p in figures["others"] if p["name"] == "fp-spinner"]
    assert spinners and all(p["cpu_s"] > 0.1 for p in spinners)
    # The named ones are the others' top: their time is within the total.
    assert sum(p["cpu_s"] for p in figures["others"]) <= figures["others_cpu_s"] + 0.05
    reason = _summary(figures)["busy"]
    assert reason.startswith("busy: host h: other processes used")
    assert "fp-spinner (pid " in reason


@needs_namespace
def test_the_runs_own_processes_are_not_others() -> None:
    figures = _window("own")  # the run's child spun; nothing else did
    assert not [p for p in figures["others"] if p["name"] == "fp-spinner"]
    assert _summary(figures)["busy"] is None


# fleetperf's own machinery beside the run, each spinning as the others' neighbours do: a
# module run as Ansible starts one with pipelining (``sh -c 'python3 && sleep 0'``, the
# module's code on stdin), a non-interactive SSH session whose child ended in
# the window (its CPU reaped onto the session), the controller itself (``python -m tui.cli``
# from a package of that name) and a child of the controller; and an interactive session,
# which is someone's work.
def _own_window(tmp_path: Path, interactive: bool) -> dict:
    """The run's window beside fleetperf's own processes (and an interactive session)."""
    module = tmp_path / "module.py"  # its name says nothing: the wrapper is what is read
    module.write_text(SPIN)
    (tmp_path / "tui").mkdir()
    (tmp_path / "tui" / "__init__.py").write_text("")
    child = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {SPIN!r}])\n"
    (tmp_path / "tui" / "cli.py").write_text(child + SPIN)  # a controller and its child
    python = sys.executable  # the session's own is its title (exec -a)
    # It spins 1.2 s in a child it reaps inside the window, then sleeps: the CPU is on it.
    session = (
        "import subprocess, time\n"
        f"p = subprocess.Popen([{python!r}, '-c', {SPIN!r}]); time.sleep(1.2); p.kill()\n"
        "p.wait(); time.sleep(10)\n"
    )
    title = "sshd: root@pts/0" if interactive else "sshd: root@notty"
    neighbours = [["bash", "-c", f'exec -a "{title}" {python} -c "$0"', session]]
    if not interactive:  # alone, so that its reaped child has the CPU it asks for
        ansible = ["/bin/sh", "-c", f"{python} < {module} && sleep 0"]
        neighbours += [ansible, [python, "-m", "tui.cli"]]
    run = RUN.format(harness=HARNESS, spin=SPIN)
    driver = (
        "import json, subprocess, sys, time\n"
        f"n = [subprocess.Popen(a, cwd={str(tmp_path)!r}) for a in {neighbours!r}]\n"
        "time.sleep(0.3)\n"  # started and titled before the run's window opens
        f"run = subprocess.run([sys.executable, '-c', {run!r}, 'own-machinery'],"
        " capture_output=True, text=True, timeout=60)\n"
        "sys.stdout.write(run.stdout); sys.stderr.write(run.stderr)\n"
    )
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", driver],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_namespace
def test_fleetperfs_own_machinery_is_not_other_work(tmp_path: Path) -> None:
    figures = _own_window(tmp_path, interactive=False)
    # Four spinners in the window, all fleetperf's: counted apart, and quiet.
    assert figures["fleetperf_cpu_s"] > 0.5, figures
    assert not [p for p in figures["others"] if p["name"] == "fp-spinner"], figures
    assert figures["others_cpu_s"] / figures["window_s"] / figures["host_cpus"] < BUSY_FRACTION
    assert _summary(figures)["busy"] is None


@needs_namespace
def test_an_interactive_sessions_work_is_other_work(tmp_path: Path) -> None:
    figures = _own_window(tmp_path, interactive=True)
    # The session's child spun into the window and was reaped onto the session: others'.
    assert figures["others_cpu_s"] > 0.3, figures
    assert _summary(figures)["busy"] is not None


def test_the_run_root_is_the_furthest_ancestor_that_names_the_run_dir(tmp_path: Path) -> None:
    """The launch's supervisor and torchrun name the run directory on their command line;
    the workload's process finds the topmost of them: the run's process tree."""
    child = (
        f"import sys; sys.path.insert(0, {HARNESS!r}); from harness.procwindow import run_root;"
        f" import os; print(run_root({str(tmp_path)!r}), os.getppid())"
    )
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    done = subprocess.run(
        [sys.executable, "-c", parent, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    root, parent_pid = done.stdout.split()
    assert root == parent_pid  # the parent names the run dir; the child does not
    assert run_root(str(tmp_path / "elsewhere")) == os.getpid()  # none does: this process


def test_the_sampler_sends_the_window_and_says_nothing_it_cannot_read() -> None:
    sample = SysSampler(None, root=os.getpid()).sample()
    assert {"others_cpu_s", "window_s", "host_cpus", "others"} <= set(sample)
    assert sample["host_cpus"] == os.cpu_count()
    # cpufreq: the mean where the kernel shows it, else no key at all (never a guess).
    freq = cpu_freq_mhz()
    assert ("cpu_freq_mhz" in sample) == (freq is not None)
    assert "others_cpu_s" not in SysSampler(None).sample()  # no root: no window
    assert isinstance(ProcWindow(os.getpid()).figures()["others"], list)


def test_the_others_of_a_sys_event_are_bounded_and_cleaned() -> None:
    def others(value: object) -> tuple[dict, ...]:
        line = json.dumps({"t": 1.0, "kind": "sys", "rank": 0, "others": value})
        ev = parse("run-1", "h", line)
        assert isinstance(ev, SysSample) and "others" not in ev.values
        return ev.others

    good = {"pid": 12, "name": "stress\x1b[31m", "cpu_s": 3.5}
    (one,) = others([good])
    assert one == {"pid": 12, "name": "stress\\u001b[31m", "cpu_s": 3.5}
    assert others([good] * (MAX_OTHERS + 1)) == ()  # more than the harness sends: none kept
    assert others("stress") == ()
    bad = [
        {"pid": -1, "name": "a", "cpu_s": 1.0},
        {"pid": 1, "name": "x" * 65, "cpu_s": 1.0},
        {"pid": 1, "name": "a", "cpu_s": -1.0},
        {"pid": True, "name": "a", "cpu_s": 1.0},
        "a",
    ]
    assert others(bad[:MAX_OTHERS]) == () and others(bad[3:]) == ()


def test_a_window_no_host_could_send_is_not_kept() -> None:
    for odd in ({"host_cpus": 0}, {"host_cpus": 2.0**40}, {"others_cpu_s": -1.0}):
        figures = {"others_cpu_s": 1.0, "window_s": 2.0, "host_cpus": 2, **odd}
        summary = _summary(figures)
        assert summary["hosts"][0]["others"] is None and "busy" not in summary


def test_a_throttled_device_is_named_with_its_reasons() -> None:
    monitor = Monitor("nvidia", 2)
    for i, thermal in enumerate((1.0, 1.0, 0.0)):
        values = {"dev0_temp_c": 90.0, "dev0_sm_clock_mhz": 1100.0}
        for d in (0, 1):
            values |= {
                f"dev{d}_throttle_thermal": thermal if d == 0 else 0.0,
                f"dev{d}_throttle_power_cap": 0.0,
                f"dev{d}_throttle_hw_slowdown": 0.0,
            }
        monitor.add(SysSample("run-1", "g", 0, float(i), values))
    summary = monitor.summary()
    assert summary["throttle"] == "throttle: host g device 0: thermal in 2 of 3 samples"
    dev0, dev1 = summary["hosts"][0]["devices"]
    assert dev0["throttle"] == {"samples": 3, "thermal": 2, "power_cap": 0, "hw_slowdown": 0}
    assert dev0["sm_clock_mhz"]["avg"] == 1100.0
    assert dev1["throttle"]["thermal"] == 0
    assert "busy" not in summary  # no window sent: busy or quiet is not known
    assert any("busy or quiet is not known" in n for n in summary["notes"])


def test_a_device_without_reasons_is_not_called_throttled() -> None:
    monitor = Monitor("nvidia", 1)
    monitor.add(SysSample("run-1", "g", 0, 0.0, {"dev0_temp_c": 60.0}))
    summary = monitor.summary()
    assert summary["throttle"] is None and summary["hosts"][0]["devices"][0]["throttle"] is None
    assert "host g device 0: no throttle reasons: the driver or tool gave none" in " ".join(
        summary["notes"]
    )


def test_the_nvml_reason_bits_are_nvmls() -> None:
    """The names the record gives NVML's clocks event reasons, against nvidia-ml-py's own
    constants (nvml.h): thermal is SW and HW thermal slowdown, power cap the SW power cap,
    HW slowdown also the power brake. (No NVIDIA device here: the read itself is untested.)"""
    pynvml = pytest.importorskip("pynvml")
    expected = {
        "thermal": pynvml.nvmlClocksThrottleReasonSwThermalSlowdown
        | pynvml.nvmlClocksThrottleReasonHwThermalSlowdown,
        "power_cap": pynvml.nvmlClocksThrottleReasonSwPowerCap,
        "hw_slowdown": pynvml.nvmlClocksThrottleReasonHwSlowdown
        | pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown,
    }
    assert dict(nvml.THROTTLE_BITS) == expected


def test_a_kunlunxin_host_says_why_its_devices_are_not_read() -> None:
    monitor = Monitor("kunlunxin", 1)
    monitor.add(SysSample("run-1", "k", 0, 0.0, {"cpu_percent": 5.0}))
    assert (
        "host k: no device readings: only NVML (nvidia) and ixsmi (iluvatar) are read, and"
        " this vendor kunlunxin host gave none (xpu_smi: no query syntax or Python binding"
        " documented)"
    ) in monitor.summary()["notes"]


def test_an_smi_tool_that_is_not_there_gives_nothing() -> None:
    """ixsmi is not on this machine (its parsing has not met the real tool: docs/monitoring.md);
    where it is missing the devices' keys are left out, never guessed."""
    assert shutil.which("fleetperf-no-such-smi") is None
    assert smi_readings("fleetperf-no-such-smi", 8) == {}
