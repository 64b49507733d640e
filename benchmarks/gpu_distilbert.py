"""DistilBERT at the seed's size on a CUDA machine: the real case, run as the controller runs it.

    PYTHONPATH=cases python benchmarks/gpu_distilbert.py --out DIR [--precision tf32 fp32 amp]

For each precision it stages the case's synthetic data (`prepare.py --synthetic`), swaps the
tiny checkpoint for a full-size DistilBERT (distilbert-base's shape: 6 layers, 768 wide, 12
heads, 30,522-token vocabulary; random weights: throughput does not depend on them), writes
the run's config.json with FlagPerf's A100x1x1 hyperparameters (bs 96, lr 1.5e-4, sequences
padded to 512), starts `cases/distilbert-pytorch/run.py` per docs/workload-contract.md and
prints the `result` event's throughput, MFU and memory as one JSON line per precision. No
Ansible: this measures the workload and the harness, not the fleet. The accuracy means
nothing (synthetic sentences, a budget of a few hundred steps).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASE = REPO / "cases" / "distilbert-pytorch"
HP = {
    "train_batch_size": 96,
    "eval_batch_size": 256,
    "learning_rate": 1.5e-4,
    "weight_decay": 0.0,
    "max_seq_length": 512,
    "gradient_accumulation_steps": 8,  # config_A100x1x1.py
    "max_epoch": 10,
    "eval_every_samples": 0,  # the case evaluates at each epoch's end (6,000 synthetic rows)
    "target_acc": 0.91,
    "require_target": True,
    "log_every_steps": 20,
    "warmup_steps": 20,
    "seed": 1234,
    "num_workers": 2,
}


def full_size_checkpoint(checkpoint: Path) -> None:
    """Replace the tiny model in ``checkpoint`` by distilbert-base's shape (tokenizer kept)."""
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    model = DistilBertForSequenceClassification(DistilBertConfig(num_labels=2))
    model.save_pretrained(checkpoint)


def run_once(out: Path, precision: str, chip: str, samples: int) -> dict:
    data = out / "data" / "distilbert-pytorch"
    if not (data / "checkpoint").is_dir():
        env = {**os.environ, "PYTHONPATH": str(REPO / "cases")}
        cmd = [sys.executable, str(CASE / "prepare.py"), "--out", str(data), "--synthetic"]
        subprocess.run(cmd, env=env, check=True)
        full_size_checkpoint(data / "checkpoint")
    run_dir = out / f"run-{precision}"
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "run_id": f"gpu-{precision}",
        "case": "distilbert-pytorch",
        "vendor": "nvidia",
        "chip": chip,
        "nnodes": 1,
        "nproc_per_node": 1,
        "precision": precision,
        "hp": {**HP, "precision": precision, "max_samples": samples},
        "fix_hp": {"train_batch_size": 96, "learning_rate": 1.5e-4},
    }
    (run_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
    cmd = [sys.executable, str(CASE / "run.py"), "--config", str(run_dir / "config.json")]
    cmd += ["--data-dir", str(data), "--run-dir", str(run_dir)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "cases")}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    result = next((e for e in events if e["kind"] == "result"), None)
    if result is None:
        return {"precision": precision, "exit": proc.returncode, "stderr": proc.stderr[-2000:]}
    return {
        "precision": precision,
        "exit": proc.returncode,
        "status": result.get("status"),
        "metrics": result.get("metrics"),
        "peak": result.get("peak"),
        "notes": result.get("notes"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--precision", nargs="+", default=["tf32", "fp32", "amp"])
    ap.add_argument("--samples", type=int, default=96 * 300, help="training budget per run")
    args = ap.parse_args()

    import torch

    sys.path.insert(0, str(REPO / "cases"))
    from harness.peak import chip_from_device_name

    name = torch.cuda.get_device_name(0)
    chip = chip_from_device_name(name) or name
    print(json.dumps({"device": name, "chip": chip, "torch": torch.__version__}), flush=True)
    for precision in args.precision:
        print(json.dumps(run_once(args.out, precision, chip, args.samples)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
