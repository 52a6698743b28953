# cython: language_level=3, boundscheck=False, wraparound=False
"""Alerts of an emitted stage's match rows in one pass in C: what
alerts.alert_rows_reference makes, without the interpreter's loop (a fields
dict, an Alert and an (order, alert) pair per row; LR makes one for a third
of its reports)."""

cdef extern from "Python.h":
    int PyObject_GenericSetDict(object o, object value, void *context) except -1
    # a dict with room for n items: a fields dict made empty grew once on
    # the way to LR's 6-7 fields (a resize per alert: the fields were half
    # of this loop's cost)
    dict _PyDict_NewPresized(Py_ssize_t n)

cdef object _new = object.__new__


def alert_rows(type cls, str identity, str event_type, str topic, tuple names, list columns,
               list orders, list starts, list ends, list homes, dict texts, dict ingest):
    """[(order, cls alert)] of row i: fields {names[j]: columns[j][i]},
    partition homes[i] and its key texts[homes[i]], ingest ms
    ingest.get(homes[i], 0); each alert's __dict__ set whole, as
    Alert.made does (cls: a dataclass without __slots__)."""
    cdef Py_ssize_t n = len(homes), k = len(names), i, j
    cdef dict fields, state
    cdef list out = [None] * n
    for j in range(k):
        if len(<list> columns[j]) != n:
            raise ValueError(f"column {names[j]!r} has {len(<list> columns[j])} rows, not {n}")
    if len(orders) != n or len(starts) != n or len(ends) != n:
        raise ValueError(f"orders, starts and ends need {n} rows")
    for i in range(n):
        fields = _PyDict_NewPresized(k)
        for j in range(k):
            fields[names[j]] = (<list> columns[j])[i]
        h = homes[i]
        state = {"plan_id": identity, "event_type": event_type, "partition": h,
                 "key": texts[h], "start_ts": starts[i], "end_ts": ends[i], "fields": fields,
                 "topic": topic, "ingest_ms": ingest.get(h, 0)}
        alert = _new(cls)
        PyObject_GenericSetDict(alert, state, NULL)
        out[i] = (orders[i], alert)
    return out
