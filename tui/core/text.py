"""The text boundary: strings from a workload, a host or a user, made safe for every writer.

Where such a string enters (a workload's event line, an ansible-runner event, a user's
YAML, a record), ``clean`` makes it encodable and bounded: a lone surrogate (valid in JSON
as ``"\\ud800"``, not encodable as UTF-8) becomes U+FFFD, so result.json, the store and a
UTF-8 terminal can always write it; a string longer than ``MAX_TEXT`` keeps its head and
tail. Where text is shown, ``printable`` (terminals) and ``html_text`` (report.html) make
every control and bidi character visible as the ``\\uXXXX`` escape JSON uses, so neither
a terminal nor a browser obeys it. No textual, no rich: the engine, batch mode and the app
all use it.
"""

from __future__ import annotations

import html
import re
from typing import Any

# One string from outside, at most: the head and tail of a longer message or traceback
# (where its cause is) fit, and no record column, table cell or log line is larger.
# A workload line (64 KiB, tui/core/events.py) may still hold many of them.
MAX_TEXT = 16 * 1024
_SURROGATE = re.compile("[\ud800-\udfff]")
# Nesting cleaned: far past any config, result or record (a result's environment: 8).
_MAX_DEPTH = 64
# C0 except tab and newline, DEL, and C1 (0x80-0x9f: CSI, OSC, ST in one byte each) steer a
# terminal; ALM, LRM/RLM, the embeddings and overrides (U+202A-202E) and the isolates
# (U+2066-2069) reorder the text shown around them, on a terminal and in a browser.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD (a pair written as two escapes joined)."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean(text: str, cap: int = MAX_TEXT) -> str:
    """``text`` encodable as UTF-8 and at most about ``cap`` characters: a longer one keeps
    its head and its tail around a note of how much was cut."""
    if len(text) > cap:
        half = cap // 2
        text = f"{text[:half]} [... {len(text) - 2 * half} characters cut ...] {text[-half:]}"
    return encodable(text)


def clean_tree(value: Any, cap: int = MAX_TEXT, depth: int = 0) -> Any:
    """Parsed JSON or YAML (or a record's fields) with every string in it, keys too,
    ``clean``; what lies deeper than ``_MAX_DEPTH`` is left as it is (a YAML alias inside
    itself, ``&a [*a]``, ends there, and its reader refuses it as before)."""
    if isinstance(value, str):
        return clean(value, cap)
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {clean_tree(k, cap): clean_tree(v, cap, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_tree(v, cap, depth + 1) for v in value]
    return value


def printable(text: str) -> str:
    """``text`` for a terminal: encodable, every control character but newline and tab and
    every bidi control escaped as ``\\uXXXX`` (visible, and still valid inside a JSON string,
    so ``--format json`` output stays parseable)."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", encodable(text))


def html_text(value: object) -> str:
    """``value`` as HTML text or an attribute value: ``printable``, then HTML-escaped (a
    character reference would not help: ``&#x202e;`` is the override itself)."""
    return html.escape(printable(str(value)), quote=True)
