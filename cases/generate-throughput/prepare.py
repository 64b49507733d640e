"""Stage the generate-throughput data directory: FlagPerf's XSum CSV and a model, as
generate-ttft's (cases/generate-ttft/prepare.py says what each way writes).

    python cases/generate-throughput/prepare.py --out DATA_DIR --synthetic | --from DIR
"""

import sys

from harness import generate

if __name__ == "__main__":
    sys.exit(generate.prepare(__file__, __doc__))
