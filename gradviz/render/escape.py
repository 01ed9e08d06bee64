"""All quoting of user text for DOT, Graphviz HTML-like labels and HTML pages happens here."""

from __future__ import annotations

import html
import re

import graphviz

from ..text import clean

__all__ = ["html_label_text", "html_text", "quote_id", "record_safe", "plain_label", "shorten", "tooltip_text"]

# Graphviz reads `\G \N \E \T \H \L` (graph, node, edge, tail, head names, line break) in every label kind,
# HTML-like labels included, and decodes entities first, so `&#92;` does not help: a literal backslash is written
# as two. Tooltips are expanded twice (once when read, once when written to SVG), so there it takes four.

# Control characters other than newline/tab are not valid in XML (Graphviz HTML labels, SVG output).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _clean(text: str) -> str:
    # lone surrogates (an undecodable file name) cannot be written as UTF-8: show them as `\udcff`
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", clean(str(text)))


def html_label_text(text: str) -> str:
    """Text for the inside of a Graphviz HTML-like label (`<...>`): entities escaped, newlines as `<BR/>`.

    `{ } |` have no meaning inside HTML-like labels, so they pass through; `& < > "` become entities, which
    Graphviz copies through to SVG escaped, so they show up as the characters the user wrote.
    """
    text = _clean(text).replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    return "<BR/>".join(html.escape(line, quote=True).replace("\\", "\\\\") for line in lines)


def html_text(text: str) -> str:
    """Text for an HTML page (the report): `& < > " '` escaped."""
    return html.escape(_clean(text), quote=True)


def record_safe(text: str) -> str:
    """Text for a field of a Graphviz `record` shape, where `{ } | < >` are syntax: backslash-escape them."""
    text = graphviz.escape(_clean(text))  # doubles backslashes so they are not read as escapes
    text = re.sub(r"([{}|<>\"])", r"\\\1", text)
    return text.replace("\r\n", "\n").replace("\n", r"\n")


def plain_label(text: str) -> str:
    """Text for an ordinary (non-HTML) DOT label: backslashes kept literal, newlines as DOT line breaks.

    The `graphviz` package quotes the attribute value itself; this only makes the content mean what it says.
    """
    text = graphviz.escape(_clean(text))
    return text.replace("\r\n", "\n").replace("\n", r"\n")


def tooltip_text(text: str) -> str:
    """Text for a `tooltip` attribute: one line, backslashes kept literal through Graphviz's two expansions."""
    text = " ".join(_clean(text).split())
    return text.replace("\\", "\\\\\\\\")


def quote_id(identifier: str) -> str:
    """A node id safe to hand to the `graphviz` package (ids are ours, but keep them boring)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", identifier)


def shorten(text: str, limit: int = 60) -> str:
    """One line of at most `limit` characters, with an ellipsis when cut."""
    text = " ".join(_clean(text).split())
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "\N{HORIZONTAL ELLIPSIS}"


#: The one font of every drawing: dot measures labels with it and the browser draws them with it, so labels fit
#: their boxes (`./dev` installs it: Debian's fonts-dejavu-core). The report's CSS names the same font for SVG text.
FONT = "DejaVu Sans Mono"
