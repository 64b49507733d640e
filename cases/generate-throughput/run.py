"""generate-throughput: FlagPerf's generate/Throughput task (harness/generate.py,
docs/cases/generate.md).

    PYTHONPATH=<repo>/cases python cases/generate-throughput/run.py --config RUN_DIR/config.json \
        --data-dir DATA_DIR --run-dir RUN_DIR
"""

import sys

import harness
from harness import generate

if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, generate.throughput_main))
