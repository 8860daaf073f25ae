"""A small YAML reader for workflow specs (standard library only).

It reads the subset flowd's example specs use: block mappings and
sequences, flow collections (``[a, b]``, ``{k: v}``), plain, single- and
double-quoted scalars, ``#`` comments and ``|``/``>`` block scalars. Anything
else raises ValueError naming the line; convert such a spec to JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Tuple

_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")
_FLOAT = re.compile(r"^[-+]?([0-9][0-9_]*)?\.[0-9]+([eE][-+]?[0-9]+)?$|^[-+]?[0-9]+[eE][-+]?[0-9]+$")


def _strip_comment(s: str) -> str:
    out, q = [], ""
    for i, ch in enumerate(s):
        if q:
            if ch == q:
                q = ""
        elif ch in "'\"":
            q = ch
        elif ch == "#" and (i == 0 or s[i - 1] in " \t"):
            break
        out.append(ch)
    return "".join(out).rstrip()


def scalar(tok: str) -> Any:
    t = tok.strip()
    if t == "" or t in ("~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if t.startswith('"'):
        return json.loads(t)
    if t.startswith("'"):
        return t[1:-1].replace("''", "'")
    if _INT.match(t):
        return int(t.replace("_", ""))
    if _FLOAT.match(t):
        return float(t.replace("_", ""))
    if t[0] in "[{":
        return _Flow(t).value()
    return t


class _Flow:
    def __init__(self, s: str) -> None:
        self.s, self.i = s, 0

    def value(self) -> Any:
        v = self._any()
        self._ws()
        if self.i != len(self.s):
            raise ValueError(f"unexpected {self.s[self.i:]!r} in flow collection {self.s!r}")
        return v

    def _ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def _any(self) -> Any:
        self._ws()
        c = self.s[self.i] if self.i < len(self.s) else ""
        if c == "[":
            self.i += 1
            out: List[Any] = []
            while True:
                self._ws()
                if self.s[self.i] == "]":
                    self.i += 1
                    return out
                out.append(self._any())
                self._ws()
                if self.s[self.i] == ",":
                    self.i += 1
        if c == "{":
            self.i += 1
            obj: Dict[str, Any] = {}
            while True:
                self._ws()
                if self.s[self.i] == "}":
                    self.i += 1
                    return obj
                k = self._tok(":")
                self.i += 1
                obj[str(scalar(k))] = self._any()
                self._ws()
                if self.s[self.i] == ",":
                    self.i += 1
        return scalar(self._tok(",]}"))

    def _tok(self, stops: str) -> str:
        self._ws()
        start = self.i
        if self.i < len(self.s) and self.s[self.i] in "'\"":
            q = self.s[self.i]
            self.i += 1
            while self.i < len(self.s) and self.s[self.i] != q:
                self.i += 2 if self.s[self.i] == "\\" and q == '"' else 1
            self.i += 1
            return self.s[start:self.i]
        while self.i < len(self.s) and self.s[self.i] not in stops:
            self.i += 1
        return self.s[start:self.i].strip()


def loads(text: str) -> Any:
    lines: List[Tuple[int, int, str]] = []  # (line number, indent, content)
    raw = text.splitlines()
    for n, line in enumerate(raw, 1):
        if line.strip() in ("---", "..."):
            continue
        body = _strip_comment(line)
        if body.strip():
            lines.append((n, len(body) - len(body.lstrip(" ")), body.strip()))
    p = _Block(lines, raw)
    if not lines:
        return None
    v = p.node(lines[0][1])
    if p.i != len(lines):
        raise ValueError(f"line {lines[p.i][0]}: unexpected indentation")
    return v


class _Block:
    def __init__(self, lines: List[Tuple[int, int, str]], raw: List[str]) -> None:
        self.lines, self.raw, self.i = lines, raw, 0

    def node(self, indent: int) -> Any:
        _, ind, content = self.lines[self.i]
        if content.startswith("- ") or content == "-":
            return self.seq(ind)
        return self.mapping(ind)

    def seq(self, indent: int) -> List[Any]:
        out: List[Any] = []
        while self.i < len(self.lines):
            n, ind, content = self.lines[self.i]
            if ind < indent:
                break
            if ind != indent or not (content.startswith("- ") or content == "-"):
                raise ValueError(f"line {n}: expected a sequence item")
            rest = content[1:].strip()
            if not rest:
                self.i += 1
                out.append(self.node(self.lines[self.i][1]) if self.i < len(self.lines) and self.lines[self.i][1] > indent else None)
            elif _key(rest) is not None and not rest.startswith(("[", "{", '"', "'")):
                # "- key: value" starts a mapping indented by the dash's width
                self.lines[self.i] = (n, indent + (len(content) - len(rest)), rest)
                out.append(self.mapping(self.lines[self.i][1]))
            else:
                self.i += 1
                out.append(scalar(rest))
        return out

    def mapping(self, indent: int) -> Any:
        obj: Dict[str, Any] = {}
        while self.i < len(self.lines):
            n, ind, content = self.lines[self.i]
            if ind < indent:
                break
            if ind != indent:
                raise ValueError(f"line {n}: unexpected indentation")
            kv = _key(content)
            if kv is None:
                if not obj and len(self.lines) == 1:
                    self.i += 1
                    return scalar(content)
                raise ValueError(f"line {n}: expected 'key: value'")
            k, rest = kv
            self.i += 1
            if rest in ("|", ">", "|-", ">-", "|+", ">+"):
                obj[k] = self.block_scalar(n, indent, rest)
            elif rest:
                obj[k] = scalar(rest)
            elif self.i < len(self.lines) and (self.lines[self.i][1] > indent or
                                               (self.lines[self.i][1] == indent and self.lines[self.i][2].startswith("-"))):
                obj[k] = self.node(self.lines[self.i][1])
            else:
                obj[k] = None
        return obj

    def block_scalar(self, n: int, indent: int, style: str) -> str:
        body: List[str] = []
        j = n  # raw index of the next line
        while j < len(self.raw):
            line = self.raw[j]
            if line.strip() and len(line) - len(line.lstrip(" ")) <= indent:
                break
            body.append(line)
            j += 1
        while self.i < len(self.lines) and self.lines[self.i][0] <= j:
            self.i += 1
        width = min((len(b) - len(b.lstrip(" ")) for b in body if b.strip()), default=0)
        text_lines = [b[width:] for b in body]
        while text_lines and not text_lines[-1].strip():
            text_lines.pop()
        text = "\n".join(text_lines) if style[0] == "|" else " ".join(t.strip() for t in text_lines)
        return text if style.endswith("-") else text + "\n"


def _key(content: str) -> Any:
    if content.startswith(('"', "'")):
        q = content[0]
        end = content.find(q, 1)
        if end > 0 and content[end + 1:end + 2] == ":":
            return scalar(content[:end + 1]), content[end + 2:].strip()
        return None
    m = re.match(r"^([^\s:\[\]{},][^:]*?)\s*:(\s+(.*))?$", content)
    if not m:
        return None
    return m.group(1), (m.group(3) or "").strip()
