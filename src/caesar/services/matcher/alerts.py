"""The matcher's alerts, made from a stage graph's outputs.

Most outputs of a columnar stage graph never need a record: the rows of an
emitted stage's match columns become alerts directly (`of_columns`, one
fields dict and one Alert each, in C: alert_rows.pyx), without the record
and the StageOutput the graph makes for its other callers (LR: a toll
notification or charge for a third of the reports; the record path was an
eighth of embedded CPU).
Outputs that do come as StageOutput records (aggregates, released and
limited results, the DerivedEvent path) become alerts in `of_outputs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from caesar.plans.execution import Stage
from caesar.plans.matches import MatchColumns
from caesar.plans.pattern import PatternPlan
from caesar.plans.serialize import stage_identity
from caesar.services.common.messages import Alert
from caesar.services.matcher.alert_rows import alert_rows
from caesar.services.matcher.stage_graph import StageOutput, is_public

if TYPE_CHECKING:
    from caesar.services.matcher.stage_graph import StageGraph

# per stage: (identity, output topic, timeout topic, timeout event type)
_About = tuple[str, str | None, str | None, str | None]


class AlertMaker:
    """`ingest`: partition -> Kafka ms of its latest input (the processor's
    dict, read when an alert is made, for its latency)."""

    def __init__(self, ingest: dict[int, int]) -> None:
        self.ingest = ingest
        self._about: dict[int, _About] = {}

    def about(self, stage: Stage) -> _About:
        found = self._about.get(id(stage))
        if found is None:
            plan = stage.plan
            timeout = plan.timeout if isinstance(plan, PatternPlan) else None
            # the query's stable identity: the same across model versions
            found = self._about[id(stage)] = (
                stage_identity(stage), stage.output_topic, stage.timeout_topic,
                timeout.event_type if timeout is not None else None)
        return found

    def topic_of(self, stage: Stage, event_type: str) -> str | None:
        _identity, topic, timeout_topic, timeout_type = self.about(stage)
        return timeout_topic if event_type == timeout_type else topic  # ON TIMEOUT

    def of_outputs(self, outputs: Iterable[StageOutput | Alert], graph: StageGraph
                   ) -> list[Alert]:
        """Alerts of the graph's step outputs, in their order: records
        become alerts, those made from columns pass as they are."""
        alerts: list[Alert] = []
        ingest = self.ingest
        for o in outputs:
            if type(o) is Alert:
                alerts.append(o)
                continue
            assert isinstance(o, StageOutput)
            stage, rec = o.stage, o.record
            etype = rec["type"]
            topic = self.topic_of(stage, etype)
            if topic is None:
                continue
            part = rec["_p"]
            if graph._muted and stage.plan.plan_id in graph.muted_at(part, rec["_ts"]):
                continue
            fields = {k: v for k, v in rec.items() if is_public(k)}
            alerts.append(Alert(self.about(stage)[0], etype, part, rec["_key"], o.start_ts,
                                o.end_ts, fields, topic, ingest.get(part, 0)))
        return alerts

    def of_columns(self, stage: Stage, mc: MatchColumns, rows: np.ndarray | slice,
                   homes: list[int], texts: dict[int, str]) -> list[tuple[int, Alert]]:
        """The alerts of rows `rows` of a stage's match columns (muted rows
        already left out), with their engine order; `homes`: each row's
        context partition, `texts`: their keys."""
        topic = self.topic_of(stage, mc.event_type)
        if topic is None:
            return []
        names = tuple(n for n in mc.fields if is_public(n))
        return alert_rows(Alert, self.about(stage)[0], mc.event_type, topic, names,
                          [mc.fields[n][rows].tolist() for n in names], mc.order[rows].tolist(),
                          mc.start_ts[rows].tolist(), mc.end_ts[rows].tolist(), homes,
                          texts, self.ingest)


def alert_rows_reference(cls: type[Alert], identity: str, event_type: str, topic: str,
                         names: tuple[str, ...], columns: list[list[Any]], orders: list[int],
                         starts: list[int], ends: list[int], homes: list[int],
                         texts: Mapping[int, str], ingest: Mapping[int, int]
                         ) -> list[tuple[int, Alert]]:
    """What alert_rows.pyx computes, in Python (its tests compare both)."""
    values = zip(*columns, strict=True) if names else [()] * len(homes)
    return [(order, cls(identity, event_type, h, texts[h], start, end,
                        dict(zip(names, vals, strict=True)), topic, ingest.get(h, 0)))
            for order, start, end, h, vals in zip(orders, starts, ends, homes, values,
                                                  strict=True)]
