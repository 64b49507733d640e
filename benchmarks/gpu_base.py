"""The base cases on one CUDA device: every computation precision, memory bandwidth and
capacity, host-to-device copies, each run as the controller runs it (docs/cases/base.md).

    PYTHONPATH=cases python benchmarks/gpu_base.py --out DIR [--chip H100] [--scale 0.1]

For each nvidia config of ``--chip`` (its ``H100x1x8*.yaml``) it resolves the hp as the
catalog does (case.yaml defaults, then the config's overrides), scales the timed iterations
by ``--scale`` (the vendor sizes take minutes per precision), writes RUN_DIR/config.json for
one process on device 0, starts the case's ``run.py`` per docs/workload-contract.md and
prints one JSON line per run: the result's metrics and notes, and the run's ``sys`` records
(power, temperature, memory from NVML; host CPU and memory). No Ansible and no controller:
this measures the workloads on the device. The events files are kept under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "cases"
BASE = ("base-computation", "base-memory-bandwidth", "base-memory-capacity", "base-interconnect")


def hp_of(case_dir: Path, config: Path, scale: float) -> dict:
    sys.path.insert(0, str(CASES))
    from harness.case import load_case_file
    from harness.yamlfile import read_mapping

    hp = dict(load_case_file(case_dir).defaults)
    hp.update(read_mapping(config, str(config)).get("overrides") or {})
    for key in ("iterations", "warmup"):
        if key in hp:
            hp[key] = max(1, int(hp[key] * scale))
    return hp


def run_once(out: Path, case: str, config: Path, chip: str, scale: float) -> dict:
    case_dir = CASES / case
    hp = hp_of(case_dir, config, scale)
    name = f"{case}-{config.stem}"
    run_dir = out / name
    run_dir.mkdir(parents=True, exist_ok=True)
    conf = {
        "run_id": name,
        "case": case,
        "vendor": "nvidia",
        "chip": chip,
        "nnodes": 1,
        "nproc_per_node": 1,
        "precision": hp.get("precision", "fp32"),
        "hp": hp,
        "fix_hp": {},
    }
    (run_dir / "config.json").write_text(json.dumps(conf), encoding="utf-8")
    cmd = [sys.executable, str(case_dir / "run.py"), "--config", str(run_dir / "config.json")]
    cmd += ["--data-dir", str(out / "data" / case), "--run-dir", str(run_dir)]
    env = {**os.environ, "PYTHONPATH": str(CASES), "FLEETPERF_PEAK_CACHE": str(out / "peaks.json")}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    result = next((e for e in events if e["kind"] == "result"), {})
    return {
        "run": name,
        "exit": proc.returncode,
        "wall_s": round(time.perf_counter() - t0, 1),
        "hp": {k: v for k, v in hp.items() if k != "datasheet_source"},
        "metrics": {k: v for k, v in result.get("metrics", {}).items() if v is not None},
        "notes": result.get("notes"),
        "per_device": result.get("per_device"),
        "sys": [e for e in events if e["kind"] == "sys"],
        "stderr": proc.stderr[-1500:] if proc.returncode else "",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--chip", default="H100", help="the configs' chip: nvidia/CHIPx1x8*.yaml")
    ap.add_argument("--scale", type=float, default=0.1, help="times the configs' iterations")
    ap.add_argument("--only", nargs="*", default=[], help="config stems to run (default all)")
    args = ap.parse_args()

    import torch

    print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__}))
    for case in BASE:
        for config in sorted((CASES / case / "configs" / "nvidia").glob(f"{args.chip}x1x8*.yaml")):
            if args.only and config.stem not in args.only:
                continue
            hp = hp_of(CASES / case, config, 1.0)
            if case == "base-interconnect" and hp.get("test") != "h2d":
                continue  # one device here: no pair to send to, nothing to reduce with
            row = run_once(args.out, case, config, args.chip, args.scale)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
