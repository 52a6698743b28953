"""TPStream plans (Körber, Glombiewski, Seeger, EDBT 2018): situations derived
from point events and temporal patterns over them in Allen's interval
algebra, matched as early as they are certain.

This is the contract between the compiler (src/caesar/language, producer) and
the temporal engine (src/caesar/services/matcher/tpstream/, the Cython engine
and the 2-phase reference, consumers). Change both sides in one commit.

Semantics (see docs/language.md, "Situations and temporal patterns"):

- Instants. Per stream partition, the events of the plan's source types are
  grouped by timestamp; the events of one timestamp form one instant (a
  CAESAR stream transaction). The paper assumes unique timestamps; an
  instant generalises it: a situation's condition holds at an instant when
  it holds for every event of its source type there, and an instant with no
  event of that type leaves it as it is.
- Situations (paper section 4.3, Definition 7). A situation is a maximal run
  of consecutive instants at which its condition holds: [ts, te) with ts the
  first instant of the run and te the first instant of its source type at
  which the condition fails. A run whose duration te - ts is outside
  [min_duration, max_duration] (inclusive bounds; None = unbounded) is no
  situation. Situations of one definition are disjoint.
- Certainty. At instant t a running situation's end is unknown but > t
  (timestamps are integers, so te >= t + 1). A situation exists for certain
  ("is visible") from: ts without duration bounds; with only a minimum, the
  first instant t with t + 1 - ts >= min_duration while it still runs, or
  its end if that comes first; with a maximum, only its end (paper 5.3.2).
  A relation between two situations is certain at t when it holds for every
  value the unknown ends can still take: a known end is before an unknown
  one; two unknown ends may come in any order or together.
- Matching (Definitions 9-13). A configuration (one situation per symbol)
  matches when every constraint holds (one of its relations); each
  configuration is emitted once, at the first instant t_d at which its match
  is certain (earliest detection, section 5.3) -- never at the last end.
  This is the paper's low-latency analysis: t_d is the third endpoint of the
  holding relation, the second when the constraint holds the relation's
  whole prefix group (Table 2), and no earlier than each member is visible.
- WITHIN w: a configuration is emitted only if t_d - min(ts) < w (strictly,
  like WITHIN of SEQ patterns). The paper purges situations with
  ts < t - w; CAESAR keeps the strict bound of its other windows. Situations
  are released once ts <= t - w: they can join no later match. When a
  partition is silent for at least w (its next instant comes w or more after
  its previous one), it starts afresh there: a situation still running is
  cut (it started before the window of every later match, so only the start
  of a run going on across the silence changes) -- this is what lets the
  engine forget partitions that went away (bounded state).
- Output. The derived event's timestamp is t_d (the instant the match became
  certain). Its fields are the DERIVE list (aggregates over each member's
  events with ts <= t_d, Cayuga FOLD semantics, see plans/expr.py) plus the
  member intervals `<S>_ts` and `<S>_te` (None when S is still running at
  t_d: an open end).
- emit="end" (ON END OF S, one situation): emitted at te of every situation.
- Relations are Allen's (1983). The paper's `finishes` (A.ts < B.ts <
  A.te = B.te, Table 1) is Allen's finished-by: CAESAR writes it
  `A FINISHED BY B` (or `B FINISHES A`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from caesar.plans.expr import Expr
from caesar.plans.pattern import Output

# Allen's 13 relations, `A rel B`. The order is the bit position in masks.
ALLEN: tuple[str, ...] = (
    "before", "meets", "overlaps", "starts", "during", "finishes", "equals",
    "after", "met_by", "overlapped_by", "started_by", "contains", "finished_by",
)
BIT = {name: i for i, name in enumerate(ALLEN)}
INVERSE = {
    "before": "after", "meets": "met_by", "overlaps": "overlapped_by", "starts": "started_by",
    "during": "contains", "finishes": "finished_by", "equals": "equals",
    "after": "before", "met_by": "meets", "overlapped_by": "overlaps", "started_by": "starts",
    "contains": "during", "finished_by": "finishes",
}
# Endpoint orders (Table 1), as text for docs and error messages.
DEFINITION = {
    "before": "A.ts < A.te < B.ts < B.te",
    "meets": "A.ts < A.te = B.ts < B.te",
    "overlaps": "A.ts < B.ts < A.te < B.te",
    "starts": "A.ts = B.ts < A.te < B.te",
    "during": "B.ts < A.ts < A.te < B.te",
    "finishes": "B.ts < A.ts < A.te = B.te",
    "equals": "A.ts = B.ts < A.te = B.te",
    "after": "B.ts < B.te < A.ts < A.te",
    "met_by": "B.ts < B.te = A.ts < A.te",
    "overlapped_by": "B.ts < A.ts < B.te < A.te",
    "started_by": "A.ts = B.ts < B.te < A.te",
    "contains": "A.ts < B.ts < B.te < A.te",
    "finished_by": "A.ts < B.ts < A.te = B.te",
}
# Prefix groups (Table 2): relations that agree up to the second endpoint.
# A constraint holding a whole group is certain at that endpoint.
PREFIX_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({"before", "meets"}),
    frozenset({"starts", "equals", "started_by"}),
    frozenset({"overlaps", "finished_by", "contains"}),
    frozenset({"after", "met_by"}),
    frozenset({"overlapped_by", "finishes", "during"}),
)
ALL_MASK = (1 << len(ALLEN)) - 1
OPEN = 2**62  # stands for an unknown end (> every known timestamp)


def allen(a_ts: int, a_te: int, b_ts: int, b_te: int) -> str:
    """The one Allen relation of A=[a_ts, a_te) and B=[b_ts, b_te) (ts < te)."""
    if a_te < b_ts:
        return "before"
    if a_te == b_ts:
        return "meets"
    if b_te < a_ts:
        return "after"
    if b_te == a_ts:
        return "met_by"
    if a_ts == b_ts:
        return "equals" if a_te == b_te else "starts" if a_te < b_te else "started_by"
    if a_ts < b_ts:
        return "overlaps" if a_te < b_te else "finished_by" if a_te == b_te else "contains"
    return "during" if a_te < b_te else "finishes" if a_te == b_te else "overlapped_by"


def mask_of(relations: tuple[str, ...] | frozenset[str]) -> int:
    out = 0
    for r in relations:
        out |= 1 << BIT[r]
    return out


def certain(mask: int, a_ts: int, a_te: int | None, b_ts: int, b_te: int | None) -> bool:
    """Is one of the relations in `mask` certain for A and B? An end of None
    is unknown (later than every known timestamp; two unknown ends may come in
    any order or together)."""
    if a_te is not None and b_te is not None:
        return bool(mask >> BIT[allen(a_ts, a_te, b_ts, b_te)] & 1)
    if a_te is not None:
        return bool(mask >> BIT[allen(a_ts, a_te, b_ts, OPEN)] & 1)
    if b_te is not None:
        return bool(mask >> BIT[allen(a_ts, OPEN, b_ts, b_te)] & 1)
    return all(mask >> BIT[allen(a_ts, OPEN, b_ts, OPEN + d)] & 1 for d in (-1, 0, 1))


@dataclass(frozen=True)
class SituationSpec:
    """A situation definition (DEFINE S AS condition [duration]). The
    condition reads the current event of `source_type` as `Attr(name, attr)`."""

    name: str
    source_type: str
    condition: Expr
    min_duration: int | None = None
    max_duration: int | None = None


@dataclass(frozen=True)
class TemporalConstraint:
    """`left R1 right; left R2 right; ...`: one of the relations holds
    (written in the left -> right direction)."""

    left: str
    right: str
    relations: tuple[str, ...]

    @property
    def mask(self) -> int:
        return mask_of(self.relations)


@dataclass(frozen=True)
class TemporalPlan:
    plan_id: str
    situations: tuple[SituationSpec, ...]
    constraints: tuple[TemporalConstraint, ...] = ()
    within: int | None = None
    emit: Literal["match", "end"] = "match"
    # DERIVE fields: Agg(func, situation, arg) nodes read a member's events.
    output: Output | None = None
    schemas: dict[str, dict[str, str]] = field(default_factory=dict, hash=False, compare=False)

    @property
    def source_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.source_type for s in self.situations))

    def interval_fields(self) -> tuple[str, ...]:
        return tuple(f for s in self.situations for f in (f"{s.name}_ts", f"{s.name}_te"))
