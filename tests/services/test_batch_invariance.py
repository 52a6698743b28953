"""The services' results must not depend on how the bus cuts the streams
into batches (a timestamp's transactions split over two polls, progress
arriving early or late): the distributed mode polls arbitrary batches."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from service_plans import pos, two_context_plan

from caesar.services.common.messages import InputRecord, Progress
from caesar.services.deriver.processor import DeriverProcessor
from caesar.services.matcher.processor import MatcherProcessor
from caesar.services.matcher.reference import ReferenceEngine
from caesar.services.router.processor import RouterProcessor
from caesar.services.scheduler.processor import SchedulerProcessor


def stream(seed, n=120):
    rnd = random.Random(seed)
    return [pos(t // 3, rnd.randrange(30), rnd.randrange(3), float(rnd.randrange(0, 100)))
            for t in range(n)]


def chunks(items, cuts):
    bounds = sorted({c % (len(items) + 1) for c in cuts} | {0, len(items)})
    return [items[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def run(events, cuts_d, cuts_r, cuts_m):
    plan = two_context_plan(with_aggregate=True)
    sched = SchedulerProcessor(plan)
    items = sched.process([InputRecord("pos", 0, i, e) for i, e in enumerate(events)]).transactions
    items += sched.flush().transactions
    deriver = DeriverProcessor(plan, ReferenceEngine)
    derived = []
    for part in chunks(items, cuts_d):
        out = deriver.process(part)
        derived += out.changes + ([out.progress] if out.progress else [])
    # the router sees the two topics interleaved in some order
    merged, i, j = [], 0, 0
    rnd = random.Random(len(cuts_r))
    while i < len(items) or j < len(derived):
        if j >= len(derived) or (i < len(items) and rnd.random() < 0.5):
            merged.append(items[i])
            i += 1
        else:
            merged.append(derived[j])
            j += 1
    router = RouterProcessor(plan)
    routed = []
    for part in chunks(merged, cuts_r):
        routed += router.process(part).routed
    matcher = MatcherProcessor(plan, ReferenceEngine)
    alerts = []
    for part in chunks(routed, cuts_m):
        alerts += matcher.process(part).alerts
    changes = [(c.key, c.ts, c.vector) for c in derived if not isinstance(c, Progress)]
    return sorted(a.identity() for a in alerts), changes


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 1000), st.lists(st.integers(0, 500), max_size=12),
       st.lists(st.integers(0, 500), max_size=12), st.lists(st.integers(0, 500), max_size=12))
def test_results_do_not_depend_on_batch_boundaries(seed, cuts_d, cuts_r, cuts_m):
    events = stream(seed)
    assert run(events, cuts_d, cuts_r, cuts_m) == run(events, [], [], [])
