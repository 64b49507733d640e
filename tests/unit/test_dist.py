"""The harness's collectives over two real ranks (gloo on this CPU): the run's totals are
each rank's counts summed and the slowest rank's times, as merge_totals says, and memory is
the rank that used the most."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from conftest import REPO
from harness.perf import PerfTotals, merge_totals

RANK = r"""
import json
import harness
from harness.dist import DistEnv, init_distributed, reduce_memory, reduce_totals
from harness.dist import shutdown_distributed
from harness.memory import MemoryMonitor
from harness.perf import PerfTotals

env = DistEnv.from_env()
device = harness.open_device("cpu", "fp32")
init_distributed(env, device, timeout_s=60)
r = env.rank
mine = PerfTotals(
    samples=100 + r, tokens=1000 + 10 * r, padded_tokens=1200 + 20 * r, steps=10 + r,
    warmup_steps=2 + r, warmup_samples=16 + r, whole_time=5.0 + r, eval_time=1.0 + r,
    train_time=4.0 - r, compute_time=3.0 + 0.5 * r, warmup_time=0.5 + r,
)
ballast = bytearray(b"x" * (300 * 2**20 if r == 1 else 1))  # rank 1 peaks ~300 MiB higher
monitor = MemoryMonitor(device)
own_used, _ = monitor.peak_gib()
used, total = reduce_memory(*monitor.peak_gib())
out = {"mine": mine.as_dict(), "run": reduce_totals(mine).as_dict(), "own_used": own_used,
       "used": used, "total": total}
shutdown_distributed()
print(json.dumps(out))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two ranks over torch.distributed
def test_two_ranks_reduce_counts_by_sum_and_times_by_max() -> None:
    port = _free_port()
    procs = []
    try:
        for rank in (0, 1):
            env = dict(
                os.environ,
                PYTHONPATH=str(REPO / "cases"),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
                RANK=str(rank),
                LOCAL_RANK=str(rank),
                WORLD_SIZE="2",
                LOCAL_WORLD_SIZE="2",
            )
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", RANK], env=env, stdout=subprocess.PIPE, text=True
                )
            )
        outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert [p.returncode for p in procs] == [0, 0]
    expected = merge_totals([PerfTotals(**o["mine"]) for o in outs]).as_dict()
    assert outs[0]["run"] == outs[1]["run"] == expected
    assert expected["samples"] == 201 and expected["train_time"] == 4.0  # sum, and max
    assert outs[0]["used"] == outs[1]["used"] == max(o["own_used"] for o in outs)
    # the CPU figure is the machine's used memory (device level): rank 0 may read it after
    # rank 1 allocated its ballast, so the two can be equal; the reduction is the max
    assert outs[1]["own_used"] >= outs[0]["own_used"]
    assert outs[0]["total"] == outs[1]["total"] > 0


def test_memory_no_rank_knows_stays_unknown() -> None:
    from harness.dist import reduce_memory

    assert reduce_memory(None, None) == (None, None)  # one process: no collective
    assert reduce_memory(1.5, None) == (1.5, None)
    assert reduce_memory(None, 80.0) == (None, 80.0)
