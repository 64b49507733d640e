"""Stage the generate-throughput data directory: FlagPerf's XSum CSV and a model.

    python cases/generate-throughput/prepare.py --out DATA_DIR --synthetic
    python cases/generate-throughput/prepare.py --out DATA_DIR --from DIR

Both write ``DATA_DIR/Xsum.csv`` (columns dialogue and summary, as FlagPerf's host.yaml
``data_path`` and pandas read it) and ``DATA_DIR/model/`` (a Hugging Face model folder).
--synthetic: offline and seeded, 256 made-up rows and a tiny Llama-shaped random model with a
word-level tokenizer (harness.generate.synthetic). --from DIR: DIR/Xsum.csv and DIR/model/,
checked, then linked; the first missing or malformed file in one line, exit 2.
"""

import sys

import harness
from harness import generate

if __name__ == "__main__":
    sys.exit(
        harness.prepare_main(
            __file__,
            __doc__,
            generate.synthetic,
            stage=generate.stage,
            real_data=generate.REAL_DATA,
        )
    )
