"""The subcommands as modules (issue 44 point 4): each is one module of tui/commands/, its
arguments, handler and output together; tui/cli.py keeps the parser, the global options,
the dispatch and main. (That they reach stores and hosts through the engine, and that only
serve imports the app: lint-imports' contracts in pyproject.toml.)"""

from __future__ import annotations

import contextlib
import io

from conftest import REPO

from tui import cli


def test_each_subcommand_is_one_module_of_tui_commands() -> None:
    for command in cli.SUBCOMMANDS:
        module = f"tui.commands.{command.name.replace('-', '_')}"
        assert command.arguments.__module__ == module, command.name
        assert command.run.__module__ == module, command.name
    text = (REPO / "tui" / "cli.py").read_text()
    assert len(text.splitlines()) < 450
    assert "def cmd_" not in text and "add_subparsers(dest=" not in text


def test_images_refuses_a_vendor_without_an_image_in_one_line() -> None:
    # It read images/VENDOR/Dockerfile for any name: a traceback (FileNotFoundError).
    for vendor in ("nosuchvendor", "../cpu"):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            assert cli.main(["images", "tag", vendor]) == 2
        assert err.getvalue() == (
            f"fleetperf images: error: vendor {vendor!r}: no such image"
            " (images/VENDOR/Dockerfile is there for cpu, iluvatar, kunlunxin, nvidia)\n"
        )
