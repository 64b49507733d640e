"""generate-ttft: FlagPerf's generate/TTFT task (harness/generate.py, docs/cases/generate.md).

    PYTHONPATH=<repo>/cases python cases/generate-ttft/run.py --config RUN_DIR/config.json \
        --data-dir DATA_DIR --run-dir RUN_DIR
"""

import sys

import harness
from harness import generate

if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, generate.ttft_main))
