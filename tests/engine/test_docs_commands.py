"""Every ``fleetperf ...`` command in README.md and docs/**/*.md parses with the real argument
parser (tui/cli.py parse_args: the subcommands' too), and the short ones run (issue 29
point 9: docs/cases/glm.md showed ``fleetperf --batch glm-pytorch cpu/CPUx1x1``, which the
parser refuses).

Code blocks (fenced, or indented four spaces) hold commands and usage lines: every variant
of a usage line must parse (``[x]`` optional, ``(a | b)`` and ``a|b`` alternatives, ``...``
a repeat). Inline code in prose often names a command without its arguments
(`fleetperf report`): there only a missing required argument is forgiven, never an
unknown option, a bad choice or an argument too many.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import REPO
from seed_records import seed001_records

from tui import cli
from tui.results.store import ResultStore

DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
COMMAND_LINE = re.compile(r"^\s*(?:\$ )?(?:[A-Z_]+=\S+ )*(fleetperf(?:\s.*)?)$")
CONTINUED = re.compile(r"^\s+[\[-]")  # "          [--set KEY=VALUE ...] [-i INVENTORY]"
INLINE = re.compile(r"`(fleetperf(?:\s[^`]*)?)`")
MAX_VARIANTS = 500
ELLIPSIS = "..."
SHELL = re.compile(r"^(?:\d?>>?|<|&&|;|\|\||2>&1)")  # where the command itself ends
# What argparse says when a command or option is only named, not given whole (inline
# prose only).
NAMED_ONLY = ("the following arguments are required", "expected one argument")
# A metavariable (N, DIR, RUN_ID) refused as a value: it stands for any valid one.
METAVARIABLE = re.compile(r"invalid (?:int value|float value|choice): '[A-Z][A-Z0-9_]*'")


class Command(NamedTuple):
    where: str  # file:line
    text: str
    whole: bool  # from a code block: every variant must parse completely


def commands(rel: str, text: str) -> Iterator[Command]:
    """The commands of one page (``rel``: its path in the repository)."""
    fenced = False
    pending: Command | None = None  # a usage line may go on over indented lines
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = COMMAND_LINE.match(line)
        if pending and fenced and not match and CONTINUED.match(line):
            pending = pending._replace(text=f"{pending.text} {_uncommented(line)}")
            continue
        if pending:
            yield pending
            pending = None
        if match and (fenced or line.startswith("    ")):
            pending = Command(f"{rel}:{number}", _uncommented(match.group(1)), True)
    if pending:
        yield pending
    for match in INLINE.finditer(text):
        number = text.count("\n", 0, match.start()) + 1
        yield Command(f"{rel}:{number}", " ".join(match.group(1).split()), False)


def _uncommented(line: str) -> str:
    return re.split(r"\s#", line, maxsplit=1)[0].strip()


def _tokens(text: str) -> list[str]:
    """Words, with [ ] ( ) and a spaced | as tokens of their own."""
    return re.sub(r"([\[\]()])", r" \1 ", text).split()


def variants(text: str) -> list[list[str]]:
    """Every argv a usage line stands for (the words after ``fleetperf``)."""
    tokens = _tokens(text)
    depth = 0
    for i, token in enumerate(tokens):  # outside a group, | is a pipe; > a redirection
        depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(token, 0)
        if (token == "|" and depth == 0) or SHELL.match(token):
            tokens = tokens[:i]
            break
    alternatives, rest = _alternatives(tokens, 0)
    assert rest == len(tokens), f"unbalanced brackets in {text!r}"
    return [argv[1:] for argv in alternatives[:MAX_VARIANTS]]


def _alternatives(tokens: list[str], i: int) -> tuple[list[list[str]], int]:
    """alt := seq ('|' seq)*, up to a closing bracket or the end."""
    out: list[list[str]] = []
    while True:
        seq, i = _sequence(tokens, i)
        out += seq
        if i < len(tokens) and tokens[i] == "|":
            i += 1
            continue
        return out, i


def _sequence(tokens: list[str], i: int) -> tuple[list[list[str]], int]:
    parts: list[list[list[str]]] = []
    while i < len(tokens) and tokens[i] not in ("|", "]", ")"):
        token = tokens[i]
        if token in ("[", "("):
            inner, i = _alternatives(tokens, i + 1)
            parts.append(([[]] if token == "[" else []) + inner)
        elif token == "...":  # a repeat, or an option's value: refusal() tries both
            parts.append([[ELLIPSIS]])
        else:
            parts.append([[word] for word in token.split("|")])  # passed|failed: choices
        i += 1
    combined = [sum(words, []) for words in itertools.product(*parts)]
    return combined[:MAX_VARIANTS], i


def refusal(argv: list[str]) -> str | None:
    """What the real parser says about ``fleetperf ARGV``, or None when it takes it; each
    ``...`` read as nothing (a repeat) or as an option's value, the first reading that
    parses wins."""
    said = None
    for keep in itertools.product((False, True), repeat=argv.count(ELLIPSIS)):
        marks = iter(keep)
        reading = [w for w in argv if w != ELLIPSIS or next(marks)]
        said = _refusal(reading)
        if said is None:
            return None
    return said


def _refusal(argv: list[str]) -> str | None:
    if argv == ["--help"] or argv == ["--version"]:
        return None  # they print and exit 0: run below
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            cli.parse_args(argv)
    except SystemExit as exc:
        if exc.code:
            return err.getvalue().strip().splitlines()[-1]
    return None


def problems(command: Command) -> list[str]:
    found = []
    for argv in variants(command.text):
        said = refusal(argv)
        if said is None or METAVARIABLE.search(said):
            continue
        if not command.whole and any(words in said for words in NAMED_ONLY):
            continue
        found.append(f"{command.where}: `fleetperf {' '.join(argv)}`: {said}")
    return found


def test_every_documented_command_parses() -> None:
    found = [c for path in DOCS for c in commands(str(path.relative_to(REPO)), path.read_text())]
    assert len(found) > 50  # README and docs hold that many; fewer: the extraction broke
    assert sum(c.whole for c in found) > 20
    wrong = [p for c in found for p in problems(c)]
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        # What docs/cases/glm.md said: positional case and config.
        ("`fleetperf --batch glm-pytorch\n  cpu/CPUx1x1`", "invalid choice: 'glm-pytorch'"),
        ("```sh\nfleetperf results [--status passed|done]\n```", "invalid choice: 'done'"),
        ("    fleetperf prepare  # the case is missing", "arguments are required"),
        ("```\nfleetperf --case glm-pytorch --config cpu/CPUx1x1\n```", "--case needs --batch"),
        ("```\nfleetperf fleet (up | down)\n```", "arguments are required: N"),
    ],
)
def test_the_check_catches_a_wrong_command(markdown: str, expected: str) -> None:
    (command,) = commands("docs/x.md", markdown)
    (problem,) = problems(command)
    assert expected in problem and problem.startswith("docs/x.md:")


def test_a_usage_line_goes_on_over_indented_lines() -> None:
    (command,) = commands(
        "README.md", "```\nfleetperf results [RUN_ID]\n          [--format md|xml]  # x\n```"
    )
    assert command.text == "fleetperf results [RUN_ID] [--format md|xml]"
    found = problems(command)  # the continued line is checked too: with and without RUN_ID
    assert len(found) == 2 and all("invalid choice: 'xml'" in p for p in found)


def test_usage_lines_expand_to_each_form() -> None:
    assert variants("fleetperf fleet (up N [--slurm] | down) [--dir DIR]") == [
        ["fleet", "up", "N"],
        ["fleet", "up", "N", "--dir", "DIR"],
        ["fleet", "up", "N", "--slurm"],
        ["fleet", "up", "N", "--slurm", "--dir", "DIR"],
        ["fleet", "down"],
        ["fleet", "down", "--dir", "DIR"],
    ]
    assert variants("fleetperf results --format json | jq .") == [["results", "--format", "json"]]


def test_help_lists_every_subcommand_with_its_line() -> None:
    shown = cli.parser().format_help()
    assert len(cli.SUBCOMMANDS) == 13
    for command in cli.SUBCOMMANDS:
        assert re.search(
            rf"^ +{re.escape(command.name)} +{re.escape(command.help[:20])}", shown, re.M
        )


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["cases"], "distilbert-pytorch  ("),
        (["--help"], "usage: fleetperf"),
        (["--version"], "fleetperf "),
        (["fleet", "--help"], "usage: fleetperf fleet"),
        (["images", "tag", "cpu"], "fleetperf/cpu:"),
    ],
)
def test_the_short_commands_run(argv: list[str], says: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(says) or says in out.stdout
    assert out.stderr == ""


# The README's command-line section, walked (issue 41): each cheap command's shortest and
# fullest form runs against a store of the seeds' runs, metavariables given a real value.
CHEAP = ("cases", "results", "report", "peak", "--help", "--version")
VALUES = {
    "DIR": "{results}",
    "report.html": "{tmp}/report.html",
    "CASE": "distilbert-pytorch",
    "RUN_ID": "r1",
    "DAYS": "30",
    "S": "failed",
    "DATE": "2026-11-01",
    "VENDOR": "cpu",
}


def _walked() -> list[tuple[str, list[str]]]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    walked = []
    for command in commands("README.md", section):
        forms = variants(command.text) if command.whole else []
        for argv in (forms[:1] + forms[-1:]) if forms else []:
            words = [w for w in argv if w != ELLIPSIS]
            first = next((w for w in words if not w.startswith("-")), words[0] if words else "")
            if words and (first in CHEAP or words[0] in CHEAP) and "--batch" not in words:
                walked.append((command.text, words))
    return walked


def test_the_readme_walkthrough_runs(tmp_path: Path) -> None:
    walked = _walked()
    assert len(walked) >= 8  # results, its --prune forms, report, cases, peak, help, version
    for i, (text, argv) in enumerate(walked):
        results = tmp_path / f"r{i}"
        with ResultStore(results / "fleetperf.sqlite") as store:
            for record in seed001_records():
                store.add(record)
        given = [VALUES.get(w, w).format(results=results, tmp=tmp_path) for w in argv]
        out = subprocess.run(
            [sys.executable, "-m", "tui.cli", *given],
            cwd=REPO,
            env={**os.environ, "FLEETPERF_RESULTS": str(results), "FLEETPERF_DATA": str(results)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, f"{text}: fleetperf {' '.join(given)}: {out.stderr}"
        assert "Traceback" not in out.stderr
