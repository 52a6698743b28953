"""The ACEP paper's experiment workload (section 6, Table 1), synthetic: a
pool of K query-rule pairs over T shared tables. Every input event is one
s-transaction and triggers one actor: a query that reads `read_n` tables
(lookups by key), or — with probability `write_n` — a query-rule pair that
also writes one table (an UPSERT). Locks are table-level (the paper's
Figures 6 and 8, lockG = table).

The model is CAESAR text, compiled like any other; the matches each actor
gets are its single-event pattern's (`E<i> e`)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from caesar.language import compile_phases
from caesar.plans.tables import AcepPlan


@dataclass(frozen=True)
class Pool:
    actors: int = 8
    tables: int = 8
    read_n: int = 1
    write_n: float = 0.25
    keys: int = 50
    seed: int = 1

    def model(self) -> str:
        rng = random.Random(self.seed)
        lines = ["MODEL acep_bench"]
        lines += [f"EVENT E{i}(k INT, ts INT) TIMESTAMP ts" for i in range(self.actors)]
        lines += [f"TABLE t{j}(k INT, v INT, PRIMARY KEY (k))" for j in range(self.tables)]
        for i in range(self.actors):
            reads = rng.sample(range(self.tables), self.read_n)
            items = ", ".join(f"(SELECT v FROM t{j} WHERE k = e.k) AS v{n}"
                              for n, j in enumerate(reads))
            if i < self.writers():
                target = rng.randrange(self.tables)
                lines.append(f"RULE pair{i} ON E{i} e DO BEGIN "
                             f"DERIVE Q{i}(e.k AS k, {items}); "
                             f"UPSERT INTO t{target} VALUES (e.k, e.ts); END")
            else:
                lines.append(f"DERIVE Q{i}(e.k AS k, {items}) PATTERN E{i} e")
        return "\n".join(lines) + "\n"

    def writers(self) -> int:
        """Actors that write: half the pool (write_n picks how often they fire)."""
        return self.actors // 2

    def plan(self) -> AcepPlan:
        acep = compile_phases(self.model()).acep
        assert acep is not None
        return acep

    def transactions(self, n: int) -> list[tuple[int, dict[str, list[dict[str, Any]]]]]:
        rng = random.Random(self.seed + 1)
        plan = self.plan()
        writers = [a.name for a in plan.actors if a.write_tables]
        readers = [a.name for a in plan.actors if not a.write_tables]
        out = []
        for ts in range(1, n + 1):
            actor = rng.choice(writers if rng.random() < self.write_n else readers)
            out.append((ts, {actor: [{"e__k": rng.randrange(self.keys), "e__ts": ts}]}))
        return out
