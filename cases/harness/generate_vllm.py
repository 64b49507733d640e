"""FlagPerf's offline vLLM passes, in the engine's own interpreter (.venv-vllm).

    ENGINE_PYTHON generate_vllm.py PARENT_PID REQUEST.json RESULT.json

Run by harness/generate.py (``vllm_passes``), never imported by a workload. As
generate/{TTFT,Throughput}/nvidia/vllm/*.py at FlagPerf's HEAD: ``LLM(model=...,
tensor_parallel_size=..., trust_remote_code=True, tokenizer_mode="auto")``, then per pass
``start = time.perf_counter()``, ``outputs = model.generate(list(inputs), SamplingParams(
max_tokens=n))``, ``torch.cuda.synchronize()``, ``end = time.perf_counter()``. Writes
``{"passes": [{"duration_s", "outputs": [{"text", "tokens", "prompt_tokens"}]}]}``.
The workload starts it as the leader of a process group of its own, which vLLM's processes
(engine core, workers) join. It asks the kernel for SIGTERM when its parent (the workload)
dies, as llm-serving's engine_start.py does, and on SIGTERM stops the whole group: an offline
``LLM`` killed by the default action leaves its engine core running, and an orphaned engine
core was seen to ignore SIGTERM (tests/cases/test_generate.py, the workload killed outright).
"""

import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

_PR_SET_PDEATHSIG = 1
GRACE_S = 3  # vLLM's processes' time to stop on SIGTERM before the group is killed


def _stop_group(_signum: int, _frame: object) -> None:
    """SIGTERM to the engine's group (this process ignoring it), then SIGKILL to the group,
    this process included."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGTERM)
    time.sleep(GRACE_S)
    os.killpg(0, signal.SIGKILL)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop_group)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(sys.argv[1]):
        sys.exit("generate_vllm: the workload ended before the engine started")
    request = json.loads(Path(sys.argv[2]).read_text())

    import torch
    from vllm import LLM, SamplingParams

    extra = {"max_model_len": request["max_model_len"]} if request["max_model_len"] else {}
    model = LLM(
        model=request["model"],
        tensor_parallel_size=1,
        trust_remote_code=True,
        tokenizer_mode="auto",
        dtype=request["dtype"],
        seed=request["seed"],
        **extra,
    )
    passes = []
    for max_tokens in request["max_tokens"]:
        params = SamplingParams(max_tokens=max_tokens)
        start = time.perf_counter()
        outputs = model.generate(list(request["prompts"]), params)
        if request["synchronize"]:
            torch.cuda.synchronize()
        end = time.perf_counter()
        passes.append(
            {
                "duration_s": end - start,
                "outputs": [
                    {
                        "text": o.outputs[0].text,
                        "tokens": len(o.outputs[0].token_ids),
                        "prompt_tokens": len(o.prompt_token_ids),
                    }
                    for o in outputs
                ],
            }
        )
    done = Path(sys.argv[3])
    done.with_suffix(".part").write_text(json.dumps({"passes": passes}))
    done.with_suffix(".part").replace(done)
