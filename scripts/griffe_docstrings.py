"""A griffe extension for the documentation site: memci's docstrings, written in reST, read as Markdown.

The docstrings use three reST forms Markdown does not have; this turns each into its Markdown
equivalent before mkdocstrings renders them (the sources are not changed):

- cross-reference roles (``:class:`MessageArray```, ``:meth:`~memci.MessageArray.append```,
  ``:mod:`memci.errors```, ``:meth:`title <memci.MessageArray.sanitize>```) become links to the
  object's entry in the API reference when it has one, and code otherwise (an *optional*
  reference: one that does not resolve is not an error);
- doctest examples (``>>>`` lines and their output) become ``pycon`` code blocks;
- literal blocks (a paragraph ending in ``::`` and the indented block after it) become code blocks.

mkdocs.yml names this file in the python handler's ``extensions``.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const|type):`(~?)\.?([^`]+?)`")
TITLED = re.compile(r"^(?P<title>.*?)\s*<\.?(?P<target>[^<>]+)>$")


def _resolve(obj: griffe.Object, name: str) -> str | None:
    """The path of the object ``name`` names, seen from ``obj``'s scope, or None if none is known."""
    package = obj.package
    scopes: list[str] = []
    scope: griffe.Object | None = obj
    while scope is not None:
        scopes.append(scope.path)
        scope = scope.parent
    for path in [name, *(f"{s}.{name}" for s in scopes)]:
        if path == package.path:
            return path
        if not path.startswith(package.path + "."):
            continue
        try:
            package[path[len(package.path) + 1 :]]
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue
        return path
    return None


def _roles(obj: griffe.Object, text: str) -> str:
    def link(match: re.Match[str]) -> str:
        short, name = match.group(1), match.group(2).strip()
        titled = TITLED.match(name)
        if titled:  # :meth:`title <target>`
            title, name = titled.group("title"), titled.group("target")
        else:
            title = name.rsplit(".", 1)[-1] if short else name
        path = _resolve(obj, name)
        if path is None:
            return f"`{title}`"
        return f'<autoref identifier="{html.escape(path)}" optional><code>{html.escape(title)}</code></autoref>'

    return ROLE.sub(link, text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _blocks(text: str) -> str:
    """Doctest runs and ``::`` literal blocks as fenced code blocks; fenced blocks left alone."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    in_fence = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence
            out.append(line)
            i += 1
            continue
        if not in_fence and stripped.startswith(">>>"):
            pad = " " * _indent(line)
            out.append(f"{pad}```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(f"{pad}```")
            continue
        if not in_fence and stripped.endswith("::") and i + 1 < len(lines) and not lines[i + 1].strip():
            base = _indent(line)
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and _indent(lines[j]) > base:
                body: list[str] = []
                while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > base):
                    body.append(lines[j])
                    j += 1
                while body and not body[-1].strip():
                    body.pop()
                deeper = min(_indent(b) for b in body if b.strip())
                pad = " " * base
                head = line.rstrip()[:-2].rstrip()
                if head.strip():
                    out.append(head + ":")
                out.append("")
                out.append(f"{pad}```text")
                out.extend(pad + b[deeper:] if b.strip() else "" for b in body)
                out.append(f"{pad}```")
                out.append("")
                i = j
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


class ReSTDocstrings(griffe.Extension):
    """Rewrites every docstring of the package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._rewrite(pkg)

    def _rewrite(self, obj: griffe.Object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _roles(obj, _blocks(obj.docstring.value))
        for member in obj.members.values():
            if not member.is_alias and isinstance(member, griffe.Object):
                self._rewrite(member)
