"""Logits and loss of the aquila_33b-inference model on the first LAMBADA texts, whole (one
process) or split by tensor parallelism (under torchrun), through the case's own loader:

    python [-m torch.distributed.run --nproc_per_node 2] tests/aquila_tp_probe.py DATA_DIR OUT.pt

Global rank 0 saves {"logits", "loss", "right"} to OUT.pt. Used by tests/cases/test_aquila.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "cases"), str(REPO / "cases" / "aquila_33b-inference")]

import aquila_model  # noqa: E402
import harness  # noqa: E402
import torch  # noqa: E402
from lambada import collate, encode, load_tokenizer, read_lambada, score  # noqa: E402


def main(data: Path, out: Path) -> None:
    env = harness.DistEnv.from_env()
    device = harness.open_device("cpu", "fp32", env.local_rank)
    harness.init_distributed(env, device)
    model = aquila_model.load(data / "checkpoint", "fp32", env.world_size, device.torch_device)
    tok = load_tokenizer(data / "tokenizer")
    batch = collate(
        encode(tok, read_lambada(data / "data" / "lambada_test_bak.jsonl")[:16], 256), 0
    )
    with torch.inference_mode():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    s = score(logits, batch)
    if env.is_global_zero:
        torch.save({"logits": logits, "loss": s.nll / s.tokens, "right": s.right}, out)
    harness.shutdown_distributed()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
