"""cases/aquila_33b-inference: LAMBADA scoring, the Megatron converter, tensor parallelism.

Tolerance of the tensor-parallel check: fp32 logits within 1e-5 absolute of the one-process
run (the split matmuls sum their partial products in another order), loss within 1e-6
relative, the same last-word hits.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, Fleetperf

from tui.catalog import catalog

CASES = REPO / "cases"
CASE_DIR = CASES / "aquila_33b-inference"
PROBE = REPO / "tests" / "aquila_tp_probe.py"
sys.path.insert(0, str(CASE_DIR))

import vocab_parallel as vp  # noqa: E402
from lambada import (  # noqa: E402
    Example,
    batches,
    collate,
    encode,
    encode_flagscale,
    load_tokenizer,
    read_lambada,
    special_ids,
)

ENV = {"PYTHONPATH": str(CASES), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")
HP = {
    "precision": "fp32",
    "eval_batch_size": 8,
    "framing": "flagscale",
    "max_seq_length": 256,
    "warmup_steps": 1,
    "max_texts": 32,
}


def _python(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# Building it takes seconds (a synthetic model and data set): the tests that use it are slow.
@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aquila") / "aquila_33b-inference"
    proc = _python(str(CASE_DIR / "prepare.py"), "--synthetic", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_scoring_by_hand() -> None:
    # two texts; the last word is the final 1 and 2 tokens
    batch = collate([Example((1, 2, 3), 1), Example((1, 2, 3, 4), 2)], pad_id=0)
    assert batch["input_ids"].tolist() == [[1, 2, 3, 0], [1, 2, 3, 4]]
    assert batch["last_word"].tolist() == [[False, True, False, False], [False, True, True, False]]
    logits = torch.zeros(2, 4, 5)
    logits[0, 0, 2] = logits[0, 1, 3] = 2.0  # text 1: every next token right
    logits[1, 1, 3] = logits[1, 2, 0] = 2.0  # text 2: the last word's second token wrong
    ids, valid = batch["input_ids"][:, 1:], batch["attention_mask"][:, 1:].float()
    nll, peak = vp.token_nll(logits[:, :-1], ids, 0)  # one process: the whole vocabulary
    s = vp.tally(nll, vp.text_means(nll, valid), vp.greedy(logits[:, :-1], 0, peak), batch)
    right_p = math.exp(2) / (math.exp(2) + 4)
    # text 1: 2 tokens, both favoured; text 2: 3 tokens, one favoured, two uniform-ish
    text_1 = -2 * math.log(right_p)
    text_2 = -math.log(right_p) - math.log(1 / 5) - math.log(1 / (math.exp(2) + 4))
    assert s.tokens == 5 and s.right == 1
    assert s.nll == pytest.approx(text_1 + text_2, rel=1e-6)
    # FlagScale's "avg loss" sums each text's mean: not the per-token mean
    assert s.text_loss == pytest.approx(text_1 / 2 + text_2 / 3, rel=1e-6)


@pytest.mark.slow
def test_flagscale_framing(data_dir: Path) -> None:
    """Seed 002 as FlagScale's datasets.py frames it: [CLS] + text + </s>, padded to the
    sequence length; the last word sits before </s>."""
    tok = load_tokenizer(data_dir / "tokenizer")
    cls, eod = special_ids(tok, data_dir / "tokenizer")
    (example,) = encode_flagscale(tok, ["she opened the door"], 256, cls, eod)
    last = tok.encode(" door").ids
    assert list(example.ids) == [cls, *tok.encode("she opened the door").ids, eod]
    assert (example.last_word_tokens, example.tail) == (len(last), 1)
    batch = collate([example], pad_id=0, length=256)
    assert batch["input_ids"].shape == (1, 256) and int(batch["attention_mask"].sum()) == len(
        example.ids
    )
    n = len(example.ids)
    # positions whose next token is a last-word token: just before the last word, not </s>
    assert batch["last_word"][0].nonzero().flatten().tolist() == list(
        range(n - 2 - len(last), n - 2)
    )
    # a long text: cut to max_len characters, then to max_len tokens, as FlagScale's
    (cut,) = encode_flagscale(tok, ["word " * 100 + "end"], 16, cls, eod)
    assert list(cut.ids) == [cls, *tok.encode("word word word w").ids, eod][:16]
    (cut,) = encode_flagscale(tok, ["she opened the door"], 3, cls, eod)
    assert len(cut.ids) == 3 and cut.ids[0] == cls and cut.tail == (cut.ids[-1] == eod)


@pytest.mark.slow
def test_tokenizer_without_cls_is_named(tmp_path: Path, data_dir: Path) -> None:
    folder = tmp_path / "tokenizer"
    folder.mkdir()
    for name in ("vocab.json", "merges.txt"):
        (folder / name).write_bytes((data_dir / "tokenizer" / name).read_bytes())
    (folder / "special_tokens.txt").write_text("<|endoftext|>\n</s>\n")
    with pytest.raises(Exception, match=r"special_tokens.txt: needs \[CLS\] and </s>"):
        special_ids(load_tokenizer(folder), folder)


@pytest.mark.slow
def test_tokenizer_from_the_seed_files(data_dir: Path) -> None:
    tok = load_tokenizer(data_dir / "tokenizer")
    assert tok.token_to_id("<|endoftext|>") is not None
    (example,) = encode(tok, ["she opened the door"], 256)
    last = tok.encode(" door").ids
    assert list(example.ids) == tok.encode("she opened the").ids + last
    assert example.last_word_tokens == len(last)


@pytest.mark.slow
def test_megatron_layout_converts_to_the_same_model(data_dir: Path, tmp_path: Path) -> None:
    from transformers import LlamaForCausalLM

    ckpts = data_dir / "ckpts"
    assert (ckpts / "latest_checkpointed_iteration.txt").read_text().strip() == "1"
    rank = torch.load(
        ckpts / "iter_0000001" / "mp_rank_01" / "model_optim_rng.pt", weights_only=False
    )
    assert rank["args"].tensor_model_parallel_size == 2
    qkv = rank["model"]["language_model"]["encoder"][
        "layers.0.self_attention.query_key_value.weight"
    ]
    # one key/value group per rank: its 2 query heads, 1 key head, 1 value head, 16 rows each
    assert tuple(qkv.shape) == (4 * 16, 64)

    src = tmp_path / "src"
    src.mkdir()
    for name in ("ckpts", "tokenizer", "data"):
        (src / name).symlink_to(data_dir / name)
    out = tmp_path / "out"
    proc = _python(str(CASE_DIR / "prepare.py"), "--from", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    config = json.loads((out / "checkpoint" / "config.json").read_text())
    assert config["num_key_value_heads"] == 2 and config["num_hidden_layers"] == 2
    ids = torch.arange(1, 41).view(2, 20)
    with torch.no_grad():
        a = LlamaForCausalLM.from_pretrained(data_dir / "checkpoint")(ids).logits
        b = LlamaForCausalLM.from_pretrained(out / "checkpoint")(ids).logits
    assert torch.equal(a, b)


@pytest.mark.slow
def test_tensor_parallel_2_matches_one_process(data_dir: Path, tmp_path: Path) -> None:
    one = _python(str(PROBE), str(data_dir), str(tmp_path / "one.pt"))
    assert one.returncode == 0, one.stderr[-3000:]
    two = _python(*TORCHRUN, str(PROBE), str(data_dir), str(tmp_path / "two.pt"))
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    vocab = json.loads((data_dir / "checkpoint" / "config.json").read_text())["vocab_size"]
    assert a["logits"].shape == b["logits"].shape == (16, a["logits"].shape[1], vocab)
    assert torch.allclose(a["logits"], b["logits"], rtol=0, atol=1e-5)
    assert b["loss"] == pytest.approx(a["loss"], rel=1e-6) and a["right"] == b["right"]
    assert 0 < a["loss"] < 10


def test_seed_row_config_runs_as_flagscale_did() -> None:
    """Seed 002's A100 row: tensor parallel 8 on one node, sequences up to 4096, and bf16:
    the page labels it fp16, but FlagPerf's main.sh for the case runs FlagScale with --bf16."""
    case = catalog.load_case("aquila_33b-inference", CASES)
    config = catalog.load_config(case, "nvidia/A100x1x8")
    spec = catalog.resolve(case, config)
    assert (spec.config.nnodes, spec.config.nproc_per_node) == (1, 8)
    assert spec.precision == "bf16" and spec.hp["max_seq_length"] == 4096
    # main.sh's --micro-batch-size 1 and datasets.py's framing (issue 27 point 4)
    assert spec.hp["eval_batch_size"] == 1 and spec.hp["framing"] == "flagscale"
    # references judge only figures defined as the seed's: not the row's MFU (2N over
    # padded tokens, embeddings in) against fleetperf's 2N + 4LHQT
    judged = {r.metric for r in config.references}
    assert {"p_infer_whole", "p_infer_core", "loss"} <= judged and "mfu" not in judged


@pytest.mark.slow
def test_prepare_from_names_the_first_bad_file(data_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "tokenizer").mkdir(parents=True)
    for name in ("vocab.json", "special_tokens.txt"):
        (src / "tokenizer" / name).symlink_to(data_dir / "tokenizer" / name)
    (src / "data").symlink_to(data_dir / "data")
    out = tmp_path / "out"
    args = (str(CASE_DIR / "prepare.py"), "--from", str(src), "--out", str(out))
    proc = _python(*args)
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr == f"error: {src / 'tokenizer' / 'merges.txt'}: missing\n"

    (src / "tokenizer" / "merges.txt").symlink_to(data_dir / "tokenizer" / "merges.txt")
    (src / "ckpts").mkdir()
    proc = _python(*args)
    latest = src / "ckpts" / "latest_checkpointed_iteration.txt"
    assert proc.returncode == 2 and proc.stderr == f"error: {latest}: missing\n"

    latest.write_text("7\n")
    proc = _python(*args)
    assert proc.returncode == 2
    assert proc.stderr == f"error: {src / 'ckpts' / 'iter_0000007'}: missing (named by {latest})\n"
    assert not out.exists()


def _config(run_dir: Path, **fields: object) -> list[str]:
    """A one-process config.json for run.py (32 texts, fp32) with ``fields`` over it; the
    arguments that run it."""
    run_dir.mkdir()
    config = {"run_id": "t", "case": "aquila_33b-inference", "vendor": "cpu", "chip": "CPU"}
    config.update(nnodes=1, nproc_per_node=1, precision="fp32", hp=HP, fix_hp={})
    config.update(fields)
    (run_dir / "config.json").write_text(json.dumps({k: v for k, v in config.items() if v}))
    return [str(CASE_DIR / "run.py"), "--config", str(run_dir / "config.json"), "--run-dir"]


@pytest.mark.slow
def test_workload_contract_one_process(data_dir: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _python(*_config(run_dir), str(run_dir), "--data-dir", str(data_dir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [e["kind"] for e in events if e["kind"] != "sys"]
    assert kinds == ["start", "eval", "step", "result"]  # one scored pass (issue 40)
    assert [e["samples"] for e in events if e["kind"] == "step"] == [32]
    m = events[-1]["metrics"]
    assert events[-1]["status"] == "passed"
    assert m["p_infer_core"] >= m["p_infer_whole"] > 0
    assert 0 <= m["acc"] <= 1 and 0 < m["loss"] < 10
    assert m["acc"] == next(e["value"] for e in events if e["kind"] == "eval")
    for training_only in ("p_whole", "p_train", "p_core"):
        assert training_only not in m
    assert m["tokens_per_s_per_device"] == m["p_infer_real_whole"]  # one device, one clock
    assert m["mfu"] is None and m["mfu_measured"] > 0
    # p_infer_* count every text's 256 positions (FlagScale's 4096 a text), *_real the
    # tokens: over the counted batches (4, the first one warm-up)
    tok = load_tokenizer(data_dir / "tokenizer")
    texts = read_lambada(data_dir / "data" / "lambada_test_bak.jsonl")[:32]
    examples = encode_flagscale(tok, texts, 256, *special_ids(tok, data_dir / "tokenizer"))
    counted = batches(examples, 8)[1:]
    ratio = sum(len(g) * 256 for g in counted) / sum(len(e.ids) for g in counted for e in g)
    assert m["p_infer_whole"] / m["p_infer_real_whole"] == pytest.approx(ratio, rel=1e-9)
    assert m["p_infer_core"] / m["p_infer_real_core"] == pytest.approx(ratio, rel=1e-9)
    assert m["loss_per_token"] > 0 and m["loss"] != m["loss_per_token"]


@pytest.mark.slow
def test_precision_is_config_json_s_without_fallback(data_dir: Path, tmp_path: Path) -> None:
    """issue 20: the old run.py fell back to hp's precision, then to fp32, where config.json
    had none (case.yaml's default is bf16); now config.json's precision is the one used."""
    run_dir = tmp_path / "none"
    proc = _python(*_config(run_dir, precision=None), str(run_dir), "--data-dir", str(data_dir))
    assert proc.returncode == 2
    assert f"{run_dir / 'config.json'}: no 'precision'" in proc.stderr
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events] == ["error"]

    run_dir = tmp_path / "bf16"  # config.json's bf16 over hp's fp32
    args = _config(run_dir, precision="bf16", hp=HP | {"max_texts": 8})
    proc = _python(*args, str(run_dir), "--data-dir", str(data_dir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    start = json.loads((run_dir / "events.jsonl").read_text().splitlines()[0])
    assert start["precision"] == "bf16"


@pytest.mark.slow
def test_tensor_parallel_through_fleetperf_batch(tmp_path: Path) -> None:
    """The CPU config end to end: prepare, two processes over gloo, record and table. The
    tensor-parallel group counts each batch once (issue 19): the per-device rates are the
    group's / 2, so MFU x peak x devices = FLOPs per token x the group's tokens/s (the old
    run.py summed both ranks' copies of every batch: 2x)."""
    fp = Fleetperf(cases_dir=CASES, data_root=tmp_path / "data", results=tmp_path / "res")
    out = fp.run("prepare", "aquila_33b-inference", "--synthetic")
    assert out.returncode == 0, out.stderr
    out = fp.batch("aquila_33b-inference", "cpu/CPUx1x2", timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "localhost    started: world size 2" in out.stdout
    (rec,) = fp.records()
    assert rec["status"] == "passed"
    m = rec["metrics"]
    for key in ("p_infer_whole", "p_infer_core", "loss", "acc"):
        assert isinstance(m[key], float), key
    assert "| CPU单机2卡（1x2） | fp32 |" in out.stdout

    # the group's padded tokens per real token over the counted inference forwards
    data, hp = tmp_path / "data" / "aquila_33b-inference", rec["hp"]
    texts = read_lambada(data / "data" / "lambada_test_bak.jsonl")[: hp["max_texts"] or None]
    tok = load_tokenizer(data / "tokenizer")
    examples = encode_flagscale(
        tok, texts, hp["max_seq_length"], *special_ids(tok, data / "tokenizer")
    )
    groups = batches(examples, hp["eval_batch_size"])
    counted = groups[hp["warmup_steps"] :]
    padded = sum(len(g) * hp["max_seq_length"] for g in counted)
    real = sum(len(e.ids) for g in counted for e in g)
    (note,) = [n for n in rec["notes"] if n.startswith("mfu: model FLOPs (")]
    per_token = float(note.split("(")[1].split(" ")[0])  # printed to 4 digits
    events = tmp_path / "res" / "runs" / rec["run_id"] / "hosts" / "localhost" / "events.jsonl"
    peak = json.loads(events.read_text().splitlines()[-1])["peak"]

    # p_infer_whole is the group's padded positions per second (FlagScale's count)
    assert m["p_infer_whole"] / m["p_infer_real_whole"] == pytest.approx(padded / real, rel=1e-9)
    # within the note's rounding and the one collective between the case's and finish's clocks
    assert m["mfu_measured"] * peak["measured_flops"] * 2 == pytest.approx(
        per_token * m["p_infer_whole"], rel=1e-2
    )
    assert m["tokens_per_s_per_device"] == pytest.approx(m["p_infer_real_whole"] / 2, rel=1e-9)
