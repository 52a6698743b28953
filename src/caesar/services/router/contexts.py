"""Which stages a context bit vector activates, and which stages lose their
partial matches when a context window ends.

Vector bits are the plan's `ContextDef`s (original contexts; the default
context holds exactly when no other does). A stage may name original
contexts or grouped context windows (`ExecutionPlan.context_groups`:
original -> group ids, section 5.3 of the CAESAR paper). A group holds while
every original context it was cut from holds. A stage's partial matches
(its context history) are dropped when an original context that owns it
ends: an original owns a stage when the stage names it, or runs in all of
its groups. Moving between grouped windows of one original keeps them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from caesar.errors import PlanError
from caesar.plans.execution import ExecutionPlan, Stage


class ContextResolver:
    def __init__(self, plan: ExecutionPlan) -> None:
        self.bits = {c.name: c.bit for c in plan.contexts}
        defaults = [c for c in plan.contexts if c.default]
        if len(defaults) > 1:
            raise PlanError(f"more than one default context: {[c.name for c in defaults]}")
        self.default_mask = (1 << defaults[0].bit) if defaults else 0
        self.names_by_bit = {c.bit: c.name for c in plan.contexts}
        groups: dict[str, set[str]] = {}
        for original, ids in plan.context_groups.items():
            for g in ids:
                groups.setdefault(g, set()).add(original)
        self._group_originals = groups
        self._groups_of = {o: frozenset(ids) for o, ids in plan.context_groups.items()}

    # ---------------------------------------------------------- vectors
    def effective(self, raw_bits: int) -> int:
        """Raw bits of the non-default contexts -> vector with the default bit."""
        raw_bits &= ~self.default_mask
        return raw_bits if raw_bits else self.default_mask

    def mask(self, name: str) -> int:
        """Bits that must all be set for context `name` (original or group) to hold."""
        if name in self.bits:
            return 1 << self.bits[name]
        originals = self._group_originals.get(name)
        if not originals:
            raise PlanError(f"stage names unknown context {name!r}")
        out = 0
        for o in originals:
            if o not in self.bits:
                raise PlanError(f"context group {name!r} refers to unknown context {o!r}")
            out |= 1 << self.bits[o]
        return out

    def names(self, vector: int) -> tuple[str, ...]:
        return tuple(sorted(n for b, n in self.names_by_bit.items() if vector >> b & 1))

    # ---------------------------------------------------------- stages
    def stage_masks(self, stage: Stage) -> tuple[int, ...]:
        return tuple(self.mask(c) for c in stage.contexts)

    def owners_mask(self, stage: Stage) -> int:
        """Bits of the original contexts whose end drops this stage's partial matches."""
        names = set(stage.contexts)
        out = 0
        for name in names:
            if name in self.bits:
                out |= 1 << self.bits[name]
        for original, groups in self._groups_of.items():
            if groups and groups <= names and original in self.bits:
                out |= 1 << self.bits[original]
        return out


class StageActivation:
    """Precomputed per-stage masks: vector -> active plan ids (cached per vector)."""

    def __init__(self, resolver: ContextResolver, stages: Sequence[Stage]) -> None:
        self.resolver = resolver
        self._stages = [(s.plan.plan_id, resolver.stage_masks(s), resolver.owners_mask(s))
                        for s in stages]
        self._cache: dict[int, frozenset[str]] = {}

    def active(self, vector: int) -> frozenset[str]:
        found = self._cache.get(vector)
        if found is None:
            found = frozenset(pid for pid, masks, _ in self._stages
                              if any(vector & m == m for m in masks))
            self._cache[vector] = found
        return found

    def ended(self, ended_bits: int) -> tuple[str, ...]:
        """Plan ids whose owning context windows are among `ended_bits`."""
        if not ended_bits:
            return ()
        return tuple(pid for pid, _, owners in self._stages if owners & ended_bits)

    def plan_ids(self) -> Iterable[str]:
        return (pid for pid, _, _ in self._stages)

    def everywhere(self) -> frozenset[str]:
        """Plan ids active whatever contexts hold. A stage's masks are sets of
        bits that must all be set, so a stage active with each context alone
        (and with the default alone) is active with any combination of them."""
        found = set(self.active(self.resolver.default_mask))
        for bit in self.resolver.bits.values():
            if (1 << bit) != self.resolver.default_mask:
                found &= self.active(self.resolver.effective(1 << bit))
        return frozenset(found)
