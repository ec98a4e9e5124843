"""The CEL lexer, parser and emitter of the DRA selector front end (:mod:`.cel_syntax` checks and rewrites).

Why a parser of our own: cel-rust's parser lacks some syntax the Kubernetes environment has, and the
rewrite needs a tree. The grammar is the CEL spec's with cel-go's precedence; :func:`emit` prints a tree
back fully parenthesised (literals verbatim), so precedence is never re-interpreted.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .cel_ast import Binary, Call, CelSyntaxError, Cond, Ident, Index, ListExpr, Lit, MapExpr, Node, Select, Unary

__all__ = ["MAX_NESTING", "emit", "parse", "tokenize"]


# --------------------------------------------------------------------------------------------------
# Lexer
# --------------------------------------------------------------------------------------------------

_RESERVED = frozenset(
    [
        "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package",
        "namespace", "return", "var", "void", "while",
    ]
)
_TOKEN_RE = re.compile(
    r"(?P<space>(?:[ \t\n\r\f]+|//[^\n]*)+)"
    r"|(?P<raw>(?:[rR][bB]?|[bB][rR])"
    r"(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|\"[^\"\r\n]*\"|'[^'\r\n]*'))"
    r"|(?P<str>[bB]?(?:\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''(?:\\[\s\S]|[^\\])*?'''"
    r"|\"(?:\\.|[^\"\\\r\n])*\"|'(?:\\.|[^'\\\r\n])*'))"
    r"|(?P<double>[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<int>(?:0[xX][0-9a-fA-F]+|[0-9]+)[uU]?)"
    r"|(?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[<>!?:+\-*/%.,\[\](){}])"
)
_WORDS = {"true": "bool", "false": "bool", "null": "null", "in": "op"}
_STRING_STARTS = ("'", '"', "r'", 'r"', "b'", 'b"', "rb'", 'rb"', "br'", 'br"')


class _Token(NamedTuple):
    kind: str  # ident | int | uint | double | string | bytes | bool | null | op | eof
    text: str
    pos: int


def tokenize(src: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    n = len(src)
    match = _TOKEN_RE.match
    while i < n:
        m = match(src, i)
        if m is None:
            if src[i:i + 3].lower().startswith(_STRING_STARTS):
                raise CelSyntaxError("unterminated string literal", i)
            raise CelSyntaxError(f"unexpected character {src[i]!r}", i)
        group = m.lastgroup or "op"
        text = m.group(0)
        end = m.end()
        if group == "ident":
            kind = _WORDS.get(text, "ident")
            if text in _RESERVED:
                raise CelSyntaxError(f"reserved identifier: {text}", i)
        elif group in ("raw", "str"):
            kind = "bytes" if "b" in text[:2].lower() else "string"
        elif group in ("int", "double"):
            if end < n and (src[end].isalnum() or src[end] == "_"):
                raise CelSyntaxError(f"invalid number literal {src[i:end + 1]!r}", i)
            kind = "uint" if group == "int" and text[-1] in "uU" else group
        else:
            kind = group
        if kind != "space":
            tokens.append(_Token(kind, text, i))
        i = end
    tokens.append(_Token("eof", "", n))
    return tokens


# --------------------------------------------------------------------------------------------------
# Parser (the grammar of the CEL spec, cel-go's precedence)
# --------------------------------------------------------------------------------------------------

_RELATIONS = frozenset(("<", "<=", ">", ">=", "==", "!=", "in"))
_LITERAL_KINDS = frozenset(("int", "uint", "double", "string", "bytes", "bool", "null"))
MAX_NESTING = 250  # cel-go's default parser recursion limit


class _Parser:
    def __init__(self, src: str) -> None:
        self.tokens = tokenize(src)
        self.i = 0
        self.depth = 0

    def peek(self, offset: int = 0) -> _Token:
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok.kind == "op" and tok.text == text

    def take(self) -> _Token:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, text: str) -> _Token:
        if not self.at(text):
            tok = self.peek()
            found = "end of input" if tok.kind == "eof" else repr(tok.text)
            raise CelSyntaxError(f"expected {text!r}, found {found}", tok.pos)
        return self.take()

    def ident(self) -> str:
        tok = self.peek()
        if tok.kind != "ident":
            found = "end of input" if tok.kind == "eof" else repr(tok.text)
            raise CelSyntaxError(f"expected an identifier, found {found}", tok.pos)
        self.i += 1
        return tok.text

    def parse(self) -> Node:
        node = self.expr()
        tok = self.peek()
        if tok.kind != "eof":
            raise CelSyntaxError(f"unexpected {tok.text!r}", tok.pos)
        return node

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise CelSyntaxError("expression nested too deeply", self.peek().pos)
        try:
            cond = self.or_()
            if not self.at("?"):
                return cond
            pos = self.take().pos
            then = self.or_()
            self.expect(":")
            return Cond(cond, then, self.expr(), pos=pos)
        finally:
            self.depth -= 1

    def or_(self) -> Node:
        node = self.and_()
        while self.at("||"):
            pos = self.take().pos
            node = Binary("||", node, self.and_(), pos=pos)
        return node

    def and_(self) -> Node:
        node = self.relation()
        while self.at("&&"):
            pos = self.take().pos
            node = Binary("&&", node, self.relation(), pos=pos)
        return node

    def relation(self) -> Node:
        node = self.addition()
        while self.peek().kind == "op" and self.peek().text in _RELATIONS:
            tok = self.take()
            node = Binary(tok.text, node, self.addition(), pos=tok.pos)
        return node

    def addition(self) -> Node:
        node = self.multiplication()
        while self.at("+") or self.at("-"):
            tok = self.take()
            node = Binary(tok.text, node, self.multiplication(), pos=tok.pos)
        return node

    def multiplication(self) -> Node:
        node = self.unary()
        while self.at("*") or self.at("/") or self.at("%"):
            tok = self.take()
            node = Binary(tok.text, node, self.unary(), pos=tok.pos)
        return node

    def unary(self) -> Node:
        if self.at("!") or self.at("-"):
            op = self.peek().text
            pos = self.peek().pos
            count = 0
            while self.at(op):
                self.take()
                count += 1
            node = self.member()
            # As cel-go's parser: an even run cancels out ("!!x" is x), an odd run is one operator.
            return Unary(op, node, pos=pos) if count % 2 else node
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.at("."):
                pos = self.take().pos
                optional = False
                if self.at("?"):
                    self.take()
                    optional = True
                name = self.ident()
                if self.at("(") and not optional:
                    pos = self.take().pos  # cel-go places a member call at its '('
                    node = Call(name, self.expr_list(")"), node, pos=pos)
                else:
                    node = Select(node, name, optional, pos=pos)
            elif self.at("["):
                pos = self.take().pos
                optional = False
                if self.at("?"):
                    self.take()
                    optional = True
                index = self.expr()
                self.expect("]")
                node = Index(node, index, optional, pos=pos)
            elif self.at("{") and _is_qualified_name(node):
                raise CelSyntaxError("message construction is not supported (no message types in DRA)",
                                     self.peek().pos)
            else:
                return node

    def expr_list(self, closing: str) -> tuple[Node, ...]:
        args: list[Node] = []
        while not self.at(closing):
            args.append(self.expr())
            if not self.at(closing):
                self.expect(",")
        self.take()
        return tuple(args)

    def primary(self) -> Node:
        tok = self.peek()
        if tok.kind in _LITERAL_KINDS:
            self.take()
            return Lit(tok.kind, tok.text, pos=tok.pos)
        if tok.kind == "ident" or self.at("."):
            leading_dot = False
            if self.at("."):
                self.take()
                leading_dot = True
            name = self.ident()
            if self.at("("):
                pos = self.take().pos  # cel-go places a global call at its '('
                return Call(("." if leading_dot else "") + name, self.expr_list(")"), pos=pos)
            return Ident(name, leading_dot, pos=tok.pos)
        if self.at("("):
            self.take()
            node = self.expr()
            self.expect(")")
            return node
        if self.at("["):
            self.take()
            elements: list[Node] = []
            optional: list[bool] = []
            while not self.at("]"):
                opt = False
                if self.at("?"):
                    self.take()
                    opt = True
                elements.append(self.expr())
                optional.append(opt)
                if not self.at("]"):
                    self.expect(",")
            self.take()
            return ListExpr(tuple(elements), tuple(optional), pos=tok.pos)
        if self.at("{"):
            self.take()
            entries: list[tuple[Node, Node]] = []
            optional = []
            while not self.at("}"):
                opt = False
                if self.at("?"):
                    self.take()
                    opt = True
                key = self.expr()
                self.expect(":")
                entries.append((key, self.expr()))
                optional.append(opt)
                if not self.at("}"):
                    self.expect(",")
            self.take()
            return MapExpr(tuple(entries), tuple(optional), pos=tok.pos)
        found = "end of input" if tok.kind == "eof" else repr(tok.text)
        raise CelSyntaxError(f"unexpected {found}", tok.pos)


def _is_qualified_name(node: Node) -> bool:
    while isinstance(node, Select) and not node.optional:
        node = node.operand
    return isinstance(node, Ident)


def parse(src: str) -> Node:
    return _Parser(src).parse()


# --------------------------------------------------------------------------------------------------
# Emitter
# --------------------------------------------------------------------------------------------------

_POSTFIX_SAFE = (Ident, Select, Index, Call, ListExpr, MapExpr)


def _operand(node: Node) -> str:
    if isinstance(node, _POSTFIX_SAFE) or (isinstance(node, Lit) and node.kind not in ("int", "uint", "double")):
        return emit(node)
    return f"({emit(node)})"


def emit(node: Node) -> str:
    """CEL source for ``node`` that cel-rust parses back to the same tree."""
    if isinstance(node, Lit):
        return node.text
    if isinstance(node, Ident):
        return node.name
    if isinstance(node, Select):
        return f"{_operand(node.operand)}{'.?' if node.optional else '.'}{node.field}"
    if isinstance(node, Index):
        return f"{_operand(node.operand)}[{'?' if node.optional else ''}{emit(node.index)}]"
    if isinstance(node, Call):
        args = ", ".join(emit(a) for a in node.args)
        if node.target is None:
            return f"{node.function}({args})"
        return f"{_operand(node.target)}.{node.function}({args})"
    if isinstance(node, ListExpr):
        return "[" + ", ".join(("?" if o else "") + emit(e) for e, o in zip(node.elements, node.optional,
                                                                             strict=True)) + "]"
    if isinstance(node, MapExpr):
        return "{" + ", ".join(("?" if o else "") + f"{emit(k)}: {emit(v)}"
                               for (k, v), o in zip(node.entries, node.optional, strict=True)) + "}"
    if isinstance(node, Unary):
        inner = node.operand
        if isinstance(inner, Lit) and node.op == "-":
            return node.op + emit(inner)  # keep "-9223372036854775808" a literal
        return node.op + _operand(inner)
    if isinstance(node, Binary):
        return f"({emit(node.left)} {node.op} {emit(node.right)})"
    return f"({emit(node.cond)} ? {emit(node.then)} : {emit(node.otherwise)})"

