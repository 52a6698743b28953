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

from cpython.object cimport PyObject, PyTypeObject

cdef extern from "Python.h":
    dict PyDict_Copy(object d)

cdef tuple _NO_ARGS = ()


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
    # each alert's state: a copy of one dict holding what all rows share (a
    # copy of a dict with the same keys is a block copy), its six own values
    # replaced; the object from the type's tp_new, not object.__new__ called
    # through the interpreter (together a third of this loop's instructions)
    cdef dict shared = {"plan_id": identity, "event_type": event_type, "partition": None,
                        "key": None, "start_ts": None, "end_ts": None, "fields": None,
                        "topic": topic, "ingest_ms": 0}
    cdef PyTypeObject* tp = <PyTypeObject*> cls
    for i in range(n):
        fields = _PyDict_NewPresized(k)
        for j in range(k):
            fields[names[j]] = (<list> columns[j])[i]
        h = homes[i]
        state = PyDict_Copy(shared)
        state["partition"] = h
        state["key"] = texts[h]
        state["start_ts"] = starts[i]
        state["end_ts"] = ends[i]
        state["fields"] = fields
        state["ingest_ms"] = ingest.get(h, 0)
        alert = tp.tp_new(cls, <PyObject*> _NO_ARGS, NULL)
        PyObject_GenericSetDict(alert, state, NULL)
        out[i] = (orders[i], alert)
    return out
