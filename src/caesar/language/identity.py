"""Stable query identities: what a query's state is stored under, so that a
new version of a model finds the state of each of its queries whatever the
order, and whatever queries were added or removed around it.

A query named with `@name("...")` is that name. An unnamed query is its
output (the derived type, or the context it switches) plus a fingerprint of
its text as `caesar.language.formatter` prints it (layout and comments do not
count) and of the context block it is written in: the same query moved
elsewhere in the file keeps its identity, a changed one is a new query.
Identical unnamed queries are numbered in text order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from caesar.language.checked import CheckedQuery
from caesar.language.errors import DuplicateNameError
from caesar.language.formatter import format_query


def query_identities(queries: Iterable[CheckedQuery], source: str | None = None
                     ) -> dict[str, str]:
    """qid -> identity; DuplicateNameError when two queries share a @name."""
    out: dict[str, str] = {}
    named: dict[str, CheckedQuery] = {}
    seen: dict[str, int] = {}
    for q in queries:
        ast_q = q.source
        if ast_q.name is not None:
            if ast_q.name in named:
                raise DuplicateNameError(f"query name {ast_q.name!r} is used twice (first at line "
                                         f"{named[ast_q.name].source.name_pos.line})",
                                         ast_q.name_pos, source, found=ast_q.name,
                                         expected="a distinct name per query")
            named[ast_q.name] = q
            out[q.qid] = ast_q.name
            continue
        text = f"{q.home or ''}\n{format_query(ast_q)}"
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        head = ast_q.derive_type or f"{(ast_q.action or '').lower()}-{ast_q.target}"
        ident = f"{head}-{digest}"
        seen[ident] = seen.get(ident, 0) + 1
        out[q.qid] = ident if seen[ident] == 1 else f"{ident}-{seen[ident]}"
    clash = set(named) & {v for k, v in out.items() if named.get(v) is None or
                          named[v].qid != k}
    if clash:
        name = sorted(clash)[0]
        raise DuplicateNameError(f"query name {name!r} is also the identity of an unnamed query",
                                 named[name].source.name_pos, source, found=name,
                                 expected="another name")
    return out
