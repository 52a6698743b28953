# cython: language_level=3, boundscheck=False, wraparound=False
"""Alerts of an emitted stage's match rows in one pass in C: what
alerts.alert_rows_reference makes, without the interpreter's loop (a fields
dict, an Alert and an (order, alert) pair per row; LR makes one for a third
of its reports)."""

cdef extern from "Python.h":
    # a dict with room for n items: a fields dict made empty grew once on
    # the way to LR's 6-7 fields (a resize per alert: the fields were half
    # of this loop's cost)
    dict _PyDict_NewPresized(Py_ssize_t n)

from cpython.object cimport PyObject, PyTypeObject

from caesar.events.slots cimport slot_init, slot_offsets

cdef tuple _NO_ARGS = ()
# messages.Alert's fields, in the order alert_rows fills them
cdef tuple _ALERT = ("plan_id", "event_type", "partition", "key", "start_ts", "end_ts",
                     "fields", "topic", "ingest_ms")


def alert_rows(type cls, str identity, str event_type, str topic, tuple names, list columns,
               list orders, list starts, list ends, list homes, dict texts, dict ingest):
    """[(order, cls alert)] of row i: fields {names[j]: columns[j][i]},
    partition homes[i] and its key texts[homes[i]], ingest ms
    ingest.get(homes[i], 0); each alert's slots filled in place (cls: a
    slots class with Alert's fields, as messages.Alert)."""
    cdef Py_ssize_t n = len(homes), k = len(names), i, j
    cdef dict fields
    cdef list out = [None] * n
    cdef Py_ssize_t at[9]
    offsets = slot_offsets(cls, _ALERT)
    if offsets is None:
        raise TypeError(f"alert_rows: {cls.__name__} has no slots {_ALERT}")
    for j in range(9):
        at[j] = offsets[j]
    for j in range(k):
        if len(<list> columns[j]) != n:
            raise ValueError(f"column {names[j]!r} has {len(<list> columns[j])} rows, not {n}")
    if len(orders) != n or len(starts) != n or len(ends) != n:
        raise ValueError(f"orders, starts and ends need {n} rows")
    # the object from the type's tp_new, not object.__new__ called through
    # the interpreter; its slots written in place, not a state dict per
    # alert copied and set as its __dict__ (a third of this loop)
    cdef PyTypeObject* tp = <PyTypeObject*> cls
    for i in range(n):
        fields = _PyDict_NewPresized(k)
        for j in range(k):
            fields[names[j]] = (<list> columns[j])[i]
        h = homes[i]
        alert = tp.tp_new(cls, <PyObject*> _NO_ARGS, NULL)
        slot_init(alert, at[0], identity)
        slot_init(alert, at[1], event_type)
        slot_init(alert, at[2], h)
        slot_init(alert, at[3], texts[h])
        slot_init(alert, at[4], starts[i])
        slot_init(alert, at[5], ends[i])
        slot_init(alert, at[6], fields)
        slot_init(alert, at[7], topic)
        slot_init(alert, at[8], ingest.get(h, 0))
        out[i] = (orders[i], alert)
    return out
