"""Phase 1 (CAESAR paper section 4.2): model -> query set.

Every query gets its CONTEXT clause made explicit: a query written inside a
context block runs in that context; a top-level query without a CONTEXT
clause runs in every context. Deriving queries (INITIATE/SWITCH/TERMINATE)
and processing queries (DERIVE) are listed apart, as in the paper's Figure 5.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from caesar.language.checked import CheckedModel, CheckedQuery
from caesar.language.formatter import format_query


@dataclass(frozen=True)
class QuerySet:
    model: CheckedModel
    queries: tuple[CheckedQuery, ...]

    @property
    def deriving(self) -> tuple[CheckedQuery, ...]:
        return tuple(q for q in self.queries if q.deriving)

    @property
    def processing(self) -> tuple[CheckedQuery, ...]:
        return tuple(q for q in self.queries if not q.deriving)

    def by_id(self, qid: str) -> CheckedQuery:
        return next(q for q in self.queries if q.qid == qid)


def query_set(model: CheckedModel) -> QuerySet:
    return QuerySet(model, model.queries)


def explicit_text(q: CheckedQuery) -> str:
    """The query as text with its CONTEXT clause made explicit."""
    return format_query(replace(q.source, contexts=q.contexts))


def render_query_set(qs: QuerySet) -> str:
    out = [f"MODEL {qs.model.name}",
           "CONTEXTS " + ", ".join(("DEFAULT " if c.default else "") + c.name
                                   for c in qs.model.contexts)]
    for title, group in (("Context deriving queries", qs.deriving),
                         ("Context processing queries", qs.processing)):
        out.append(f"-- {title}")
        for q in group:
            text = explicit_text(q).replace("\n", "\n     ")
            out.append(f"{q.qid}: {text}")
    return "\n".join(out) + "\n"
