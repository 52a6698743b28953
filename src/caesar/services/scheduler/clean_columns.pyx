# cython: language_level=3, boundscheck=False, wraparound=False
"""A batch of input dicts as columns, in one pass in C: the scheduler's fast
path (processor._clean_columns) made ten list comprehensions, ten type sets
and ten list-to-array copies per batch of Linear Road reports, ~1.1 µs of
its 2.4 µs per report."""

from cpython.dict cimport PyDict_CheckExact, PyDict_GetItemWithError, PyDict_Next
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_CheckExact
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_CheckExact

import numpy as np

from caesar.events.slots cimport slot_get, slot_offsets

cdef enum:
    K_INT = 0
    K_FLOAT = 1
    K_BOOL = 2
    K_STRING = 3

cdef enum:
    _PLACES = 128  # item places of a record whose key is remembered

cdef dict _KIND = {"int": K_INT, "float": K_FLOAT, "bool": K_BOOL, "string": K_STRING}
# the column dtypes of events.batch.NUMPY_DTYPES, by kind code
cdef dict _DTYPE = {K_INT: np.int64, K_FLOAT: np.float64, K_BOOL: np.int8}


def strict_columns(list values, dict schema):
    """({attr: values} of the string attributes, {attr: array} of the
    others) when every value is a dict holding every attribute of `schema`
    (attr -> kind) as exactly its declared Python type, ints within 64 bits;
    None when one is not (the record-by-record path says why) or there is
    no value (as the reference, processor._clean_lists). TypeError
    when a value is not a dict (another Mapping: processor._clean_columns)."""
    cdef Py_ssize_t n = len(values), i, j, m = len(schema)
    cdef list names = list(schema)
    cdef int kind[64]
    cdef list cols = []
    cdef list strings
    cdef unsigned char[::1] raw
    cdef void* ptr[64]  # each numeric column's data, found once
    cdef PyObject* o
    cdef object d
    cdef int overflow
    cdef long long x
    if m > 64 or n == 0:
        return None
    for j in range(m):
        k = _KIND.get(schema[names[j]])
        if k is None:
            return None
        kind[j] = k
        ptr[j] = NULL
        if k == K_STRING:
            cols.append([None] * n)
            continue
        arr = np.empty(n, dtype=_DTYPE[k])
        raw = arr.view(np.uint8)
        ptr[j] = &raw[0]
        cols.append(arr)
    # A record's items are walked in its own order (PyDict_Next) and each key
    # matched to its attribute by the attribute the key at that place had in
    # the record before (records of one producer share their key order and
    # their key objects): a pointer compare per item instead of a hashed
    # lookup per attribute (PyDict_GetItem, ~230 instructions each, was 5 %
    # of the embedded LR pipeline). A key elsewhere is looked up once in
    # `where` (attribute -> index) and its place remembered. Every key seen
    # stays alive for the call (`values` holds the dicts), so a remembered
    # pointer cannot stand for another object.
    cdef dict where = {names[j]: j for j in range(m)}
    cdef PyObject* slot_key[_PLACES]
    cdef int slot_attr[_PLACES]
    cdef PyObject* key
    cdef Py_ssize_t pos, t
    cdef int found
    for t in range(_PLACES):
        slot_key[t] = NULL
        slot_attr[t] = -1
    for i in range(n):
        d = values[i]
        if not PyDict_CheckExact(d):
            raise TypeError(f"strict_columns: value {i} is a {type(d).__name__}, not a dict")
        pos = 0
        t = 0
        found = 0
        while PyDict_Next(d, &pos, &key, &o):
            if t < _PLACES and slot_key[t] == key:
                j = slot_attr[t]
            else:
                hit = where.get(<object> key)
                j = -1 if hit is None else <int> hit
                if t < _PLACES:
                    slot_key[t] = key
                    slot_attr[t] = j
            t += 1
            if j < 0:
                continue  # not an attribute of the type (e.g. its name)
            found += 1
            if kind[j] == K_INT:
                # exactly int: a bool is an int subclass and is refused
                if not PyLong_CheckExact(<object> o):
                    return None
                x = PyLong_AsLongLongAndOverflow(<object> o, &overflow)
                if overflow:
                    return None
                (<long long*> ptr[j])[i] = x
            elif kind[j] == K_FLOAT:
                if not PyFloat_CheckExact(<object> o):
                    return None
                (<double*> ptr[j])[i] = PyFloat_AS_DOUBLE(<object> o)
            elif kind[j] == K_BOOL:
                if <object> o is True:
                    (<signed char*> ptr[j])[i] = 1
                elif <object> o is False:
                    (<signed char*> ptr[j])[i] = 0
                else:
                    return None
            else:
                if not PyUnicode_CheckExact(<object> o):
                    return None
                strings = cols[j]
                strings[i] = <object> o
        if found != m:
            return None  # an attribute is missing
    lists = {}
    arrays = {}
    for j in range(m):
        if kind[j] == K_STRING:
            lists[names[j]] = cols[j]
        else:
            arrays[names[j]] = cols[j]
    return lists, arrays


# InputRecord's fields record_values reads in place (events/slots.pxd): four
# attribute lookups per record through the type were half of its cost
cdef tuple _FIELDS = ("topic", "value", "error", "watermark", "offset")


def record_values(list records, str type_field, str ingest_key):
    """What the scheduler's fast path asks of a batch of input records
    (processor._process_fast), in one pass: None when one is not a plain
    event of the first one's topic (no value, a decoding error, a watermark)
    or a value is not a dict (the Python path decides those); else (the
    values, whether all of them carry one type name (the same string, or
    none), which of them carry `ingest_key`, whether any does, the records'
    offsets)."""
    cdef Py_ssize_t n = len(records), i
    cdef list values = [None] * n
    cdef unsigned char[::1] has
    cdef long long[::1] offs
    cdef PyObject* o
    cdef bint any_ingest = False, one_type = True
    if n == 0:
        return None
    cls = type(records[0])
    places = slot_offsets(cls, _FIELDS)
    cdef Py_ssize_t p_topic = -1, p_value = -1, p_error = -1, p_mark = -1, p_off = -1
    cdef PyObject* f
    if places is not None:
        p_topic, p_value, p_error, p_mark, p_off = places
    topic = records[0].topic
    has_arr = np.zeros(n, dtype=np.uint8)
    off_arr = np.empty(n, dtype=np.int64)
    has = has_arr
    offs = off_arr
    name = None
    for i in range(n):
        r = records[i]
        if p_value >= 0 and type(r) is cls:
            # the fields in place (slot_offsets); an unset one: the
            # attribute path below says what it is
            f = slot_get(r, p_value)
            if f == NULL or slot_get(r, p_error) == NULL or slot_get(r, p_mark) == NULL \
                    or slot_get(r, p_topic) == NULL or slot_get(r, p_off) == NULL:
                return None
            v = <object> f
            if v is None or <object> slot_get(r, p_error) is not None \
                    or <object> slot_get(r, p_mark) is not None or not PyDict_CheckExact(v):
                return None
            t = <object> slot_get(r, p_topic)
            if t is not topic and t != topic:
                return None
            values[i] = v
            offs[i] = <object> slot_get(r, p_off)
        else:
            v = r.value
            if v is None or r.error is not None or r.watermark is not None \
                    or r.topic != topic or not PyDict_CheckExact(v):
                return None
            values[i] = v
            offs[i] = r.offset
        # WithError: no exception state saved and restored around the
        # lookup (str keys cannot raise), a third of PyDict_GetItem's cost
        o = PyDict_GetItemWithError(v, ingest_key)
        if o != NULL:
            has[i] = 1
            any_ingest = True
        if one_type:
            o = PyDict_GetItemWithError(v, type_field)
            t = None if o == NULL else <object> o
            if i == 0:
                name = t
            elif not (t is name or (type(t) is str and type(name) is str and t == name)):
                one_type = False
    if name is not None and type(name) is not str:
        one_type = False
    return values, one_type, has_arr.view(np.bool_), any_ingest, off_arr
