"""Stage the generate-ttft data directory: FlagPerf's XSum CSV and a model.

    python cases/generate-ttft/prepare.py --out DATA_DIR --synthetic
    python cases/generate-ttft/prepare.py --out DATA_DIR --from DIR

Both write ``DATA_DIR/Xsum.csv`` (columns dialogue and summary, as FlagPerf's host.yaml
``data_path`` and pandas read it) and ``DATA_DIR/model/`` (a Hugging Face model folder).
--synthetic: offline and seeded, 256 made-up rows and a tiny Llama-shaped random model with a
word-level tokenizer (harness.generate.synthetic). --from DIR: DIR/Xsum.csv and DIR/model/,
checked, then linked; the first missing or malformed file in one line, exit 2.
"""

import sys

from harness import generate

if __name__ == "__main__":
    sys.exit(generate.prepare(__file__, __doc__))
