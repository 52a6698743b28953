"""accounts.caesar's toll-account table (SPEC.md section 7) against the
validator's rule in a few lines of Python: a Type 2 query at second t answers
the sum of every charge to its car at seconds <= t, 0 for a car never
charged. Random charges and queries (hypothesis): several charges per car,
charges in the query's own second, cars asking before and after their first
charge, several cars charged in one millisecond."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.examples.linear_road.check_accounts import QUERY_TS_OFFSET, run_accounts
from caesar.examples.linear_road.partitioning import MS_PER_S


def _events(charges, queries):
    out = [{"type": "TollCharge", "ts": t * MS_PER_S + k, "vid": vid, "time": t, "toll": toll}
           for t, k, vid, toll in charges]
    out += [{"type": "AccountBalanceQuery", "ts": t * MS_PER_S + QUERY_TS_OFFSET, "time": t,
             "vid": vid, "qid": qid} for qid, (t, vid) in enumerate(queries)]
    return sorted(out, key=lambda e: e["ts"])


def _reference(charges, queries):
    return {(qid, t): [sum(toll for ct, _, cv, toll in charges if cv == vid and ct <= t)]
            for qid, (t, vid) in enumerate(queries)}


def test_a_balance_sums_the_cars_charges_up_to_its_second():
    charges = [(10, 0, 1, 5), (40, 3, 1, 7), (40, 3, 2, 100), (70, 998, 1, 2)]
    queries = [(5, 1), (10, 1), (39, 1), (40, 1), (70, 1), (70, 2), (70, 3)]
    assert run_accounts(_events(charges, queries)) == {
        (0, 5): [0], (1, 10): [5], (2, 39): [5], (3, 40): [12], (4, 70): [14],
        (5, 70): [100], (6, 70): [0]}


# one charge per car and second (a car reports at most once a second)
charge_lists = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 998), st.integers(1, 4),
                                  st.integers(1, 5000)),
                        max_size=25, unique_by=lambda c: (c[0], c[2]))
query_lists = st.lists(st.tuples(st.integers(0, 60), st.integers(1, 5)), max_size=15)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(charges=charge_lists, queries=query_lists)
def test_balances_equal_the_validators_rule(charges, queries):
    assert run_accounts(_events(charges, queries)) == _reference(charges, queries)
