"""Logits and losses of the aquila_33b-inference model on the first LAMBADA texts, whole (one
process) or split by tensor parallelism (under torchrun), through the case's own loader and
scoring:

    python [-m torch.distributed.run --nproc_per_node 2] tests/aquila_tp_probe.py DATA_DIR OUT.pt

Each rank's logits are its slice of the vocabulary (the case's vocabulary-parallel head).
Global rank 0 saves to OUT.pt: ``logits`` (the slices gathered here, for the comparison
only), ``width`` (rank 0's slice), ``nll`` and ``greedy`` (the case's vocabulary-parallel
per-token loss and greedy ids), ``nll_gathered`` and ``greedy_gathered`` (torch's
cross-entropy and argmax over the gathered logits), ``loss`` (per token) and ``right``.
Used by tests/cases/test_aquila.py and tests/cases/test_conformance_aquila.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "cases"), str(REPO / "cases" / "aquila_33b-inference")]

import aquila_model  # noqa: E402
import harness  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import vocab_parallel as vp  # noqa: E402
from lambada import collate, encode, load_tokenizer, read_lambada  # noqa: E402


def gathered(local: torch.Tensor) -> torch.Tensor:
    if not dist.is_initialized():
        return local
    parts: list[torch.Tensor | None] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, local)
    return torch.cat(parts, -1)


def main(data: Path, out: Path) -> None:
    env = harness.DistEnv.from_env()
    device = harness.open_device("cpu", "fp32", env.local_rank)
    harness.init_distributed(env, device)
    model = aquila_model.load(data / "checkpoint", "fp32", env.world_size, device.torch_device)
    tok = load_tokenizer(data / "tokenizer")
    batch = collate(
        encode(tok, read_lambada(data / "data" / "lambada_test_bak.jsonl")[:16], 256), 0
    )
    target = batch["input_ids"][:, 1:]
    with torch.inference_mode():
        local = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        start = vp.vocab_start(local.shape[-1])
        nll, peak = vp.token_nll(local[:, :-1], target, start)
        greedy = vp.greedy(local[:, :-1], start, peak)
        texts = vp.text_means(nll, batch["attention_mask"][:, 1:].float())
        s = vp.tally(nll, texts, greedy, batch)
        logits = gathered(local)
        nll_gathered = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), target, reduction="none"
        )
    if env.is_global_zero:
        torch.save(
            {
                "logits": logits,
                "width": local.shape[-1],
                "nll": nll,
                "greedy": greedy,
                "nll_gathered": nll_gathered,
                "greedy_gathered": logits[:, :-1].argmax(-1),
                "loss": s.nll / s.tokens,
                "right": s.right,
            },
            out,
        )
    harness.shutdown_distributed()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
