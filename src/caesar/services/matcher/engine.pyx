# cython: language_level=3
"""The Cython pattern engine (SASE NFA with active instance stacks).

Per (plan, partition, equivalence key) a `Part` (part.pyx) holds one `Stack`
(stack.pyx) per component: the events that may take that role, in timestamp
order, with the attribute values the plan reads (PAIS: the equivalence
attributes [attr] are part of the key, so an event only meets events it may
match with). Plans are compiled (compile.py) into flat tables (`PlanRT`,
plan_runtime.pyx); expressions run on the VM of vm.pyx.

- skip_till_any_match: an event enters the stack of component i>0 only if
  the stack of component i-1 holds an earlier event in the window (push-down
  into scan); an event of the last component triggers sequence construction,
  a depth-first search over the stacks that checks the window (construction
  push-down) and each WHERE conjunct as soon as its variables are bound.
- skip_till_next_match / strict_contiguity / partition_contiguity: runs
  (SASE+), each a list of bound rows; the same definitions as
  src/caesar/services/matcher/reference.py. Partition contiguity is keyed
  like next match (a part per [attr] value): each event of the plan's types
  reaches the part of its key (_pcont), and its runs die unless they take it.
- negation: negated events are kept in their own stacks (start/middle) and
  probed by timestamp interval; results ending with a negation are held in
  `pending` until the window after their first event has closed. With
  skip_till_next_match, a middle negation whose checks read only earlier
  events ends the runs waiting at it (compile.py's _kills_waiting): they are
  dropped once time passes the negated event, which is kept only while a
  run waits; rows no run reads and empty parts go too (_trim). With
  skip_till_any_match, a middle negation's event whose checks read one
  earlier positive is kept only if it passes them with an instance already
  there (compile.py's _gate).
- stacks are pruned by the window on every event of their part and on
  `advance`; empty parts are dropped, so state is bounded by the window.
- repetition bounds and optional components bound the DFS over a Kleene
  stack and the runs' extend/advance choice (reluctant or greedy); an
  optional component that bound nothing has row -1 (reads as missing).
- a plan with AND/OR alternatives is one PlanRT per alternative (same id).
- keyless plans (strict contiguity, after-match skip, [attr] EXCEPT NOT)
  keep one Part per partition and check [attr] while matching; with a skip
  strategy complete matches wait in `held` for earlier-started runs
  (_release); runs whose window ends derive their ON TIMEOUT event
  (_expire_runs).
"""

import numpy as np

cimport cython
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.dict cimport PyDict_Next
from cpython.object cimport Py_SIZE
from cpython.ref cimport PyObject, Py_INCREF
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_New, PyTuple_SET_ITEM

from caesar.errors import PlanError
from caesar.plans.engine import DerivedEvent
from caesar.plans.matches import MatchBatch
from caesar.services.store import tagged
from caesar.services.matcher.compile import compile_plans

from caesar.services.matcher.match_sink cimport MatchSink
from caesar.services.matcher.part cimport has_items, new_part, owned
from caesar.services.matcher.stack cimport Stack, new_stack
from caesar.services.matcher.typedefs cimport (
    K_BOOL,
    K_FLOAT,
    K_INT,
    K_MISSING,
    K_STR,
    MAXC,
    NO_TS,
    Cell,
)
from caesar.services.matcher.vm cimport (
    checks,
    eq_vals,
    eval_prog,
    holds,
    int_in,
    int_table_init,
    key_of,
    load_cell,
    same_value,
    negchecks,
    pyvalue,
)

cdef i64 _NOBODY = 4611686018427387904  # 2**62: later than any timestamp
# A sweep of a plan's parts (for those no event reaches any more) is spread
# over a quarter window of event time, at least _SWEEP_MIN parts per advance
# call: at Linear Road's state a whole sweep in one call stopped its loop
# 0.5-0.9 s every 45 s of event time, and every output behind it waited.
cdef Py_ssize_t _SWEEP_MIN = 256

# Layout of snapshot(): bump when it changes (stored with the state; a
# different value is refused on restore, never misread).
# 2: exact int64 cells; 3: alternatives, held matches (plain data); 4: a plan's
# parts column-wise (snapshot()); 5: int keys and plain runs as int64 byte
# strings; formats 3 and 4 still read
STATE_FORMAT = 5
STATE_FORMATS_READ = (3, 4, 5)
tagged.register(DerivedEvent)  # results held in partial matches

cdef extern from "Python.h":
    ctypedef struct PyObject
    ctypedef struct PyTypeObject
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    int PyObject_GenericSetAttr(object o, object name, object value) except -1
    void PyObject_GC_UnTrack(object o)
    object PyType_GenericNew(PyTypeObject* t, object args, object kwds)
    PyObject* PyDict_GetItem(object d, object key)  # borrowed, errors suppressed
    ctypedef struct PyTupleObject:
        PyObject* ob_item[1]

cdef extern from *:
    """
    #define CAESAR_PREFETCH(p) __builtin_prefetch((const void*) (p))
    """
    void CAESAR_PREFETCH(const void* p) nogil

cdef extern from "dict_probe.h":
    ctypedef struct caesar_probe:
        pass
    int caesar_probe_begin(caesar_probe* p, PyObject* d, long long key)
    int caesar_probe_step(caesar_probe* p, PyObject** value)
    int CAESAR_DICT_PROBE

# _prefetch's chunk: events whose parts are fetched together before they
# are processed (their lines must still be cached when the events come)
DEF _PF_CHUNK = 32
DEF _PF_PARTS = 256   # parts per chunk at most (the rest are not prefetched)
# steps of a staged lookup at most (slot, entry, stored key, next slot ...):
# a key further on the probe sequence is not prefetched
DEF _PF_STEPS = 8


def _probe_int(dict d, i64 key):
    """What _prefetch's staged lookup of int `key` in `d` finds: its value,
    or None (absent, further on the probe sequence than _PF_STEPS steps,
    stored as another type, or dict_probe.h not built for this Python);
    for tests of dict_probe.h against the dict itself."""
    cdef caesar_probe pr
    cdef PyObject* sp = NULL
    cdef int i, r
    if not caesar_probe_begin(&pr, <PyObject*> d, key):
        return None
    for i in range(_PF_STEPS):
        r = caesar_probe_step(&pr, &sp)
        if r == 1:
            return <object> sp
        if r == 0:
            return None
    return None


def _probe_built():
    """Whether dict_probe.h follows this Python's dict layout (3.11)."""
    return bool(CAESAR_DICT_PROBE)


cdef object _DERIVED_NEW = object.__new__
cdef tuple _DERIVED_ARGS = (DerivedEvent,)
cdef tuple _EMPTY = ()
# DerivedEvent's fields in __init__ order and where each slot lives in the
# object: _derive stores them there directly. Seven attribute stores through
# the type's descriptors (frozen: object.__setattr__'s path) cost as much as
# the rest of building a match; a slot is what PyMember_SetOne writes.
cdef tuple _FIELDS = ("plan_id", "event_type", "partition", "start_ts", "end_ts", "fields",
                      "event_seqs")
cdef Py_ssize_t _OFF[7]


cdef bint _slots_found():
    cdef int i
    for i, name in enumerate(_FIELDS):
        d = DerivedEvent.__dict__.get(name)
        if type(d).__name__ != "member_descriptor":
            return False
        _OFF[i] = (<PyMemberDescrObject*> <void*> d).d_member.offset
    return True


cdef bint _DIRECT = _slots_found()


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline u8 _output(PlanRT p, int j, Env* env, Cell* out) except 255:
    """Output j of the match in env: one attribute read in place (most
    outputs, e.g. `e.vid`), else its program on the VM."""
    cdef int a = p.out_comp[j]
    if a < 0:
        return eval_prog(p, p.out_progs[j], env, out)
    return load_cell(env, a, p.out_col[j], out)


cdef list _NO_RUN = []  # the run before its first event (never changed: read only)


cdef inline object _new_derived():
    # object.__new__(DerivedEvent): what the dataclass' __init__ starts from
    if _DIRECT:
        return PyType_GenericNew(<PyTypeObject*> <void*> DerivedEvent, _EMPTY, None)
    return _DERIVED_NEW(*_DERIVED_ARGS)


cdef inline void _slot_put(object ev, int i, object value):
    # a fresh object's slots are NULL: nothing to release
    Py_INCREF(value)
    (<PyObject**> ((<char*> <void*> ev) + _OFF[i]))[0] = <PyObject*> <void*> value


# The Python ints of recent seq numbers and timestamps (vm.int_in): with
# dense matches every event of a window takes part in many matches, and each
# match's tuple otherwise allocated a new int for it. Shared by every engine
# (ints are immutable).
cdef enum:
    INT_CACHE = 16384
    _PC = 4096  # CythonEngine._pc's places (partition int objects)
cdef i64 _IC_KEY[INT_CACHE]
cdef list _IC_OBJ = [None] * INT_CACHE
int_table_init(_IC_KEY, INT_CACHE)


cdef inline object _int_of(i64 v):
    return int_in(_IC_KEY, _IC_OBJ, INT_CACHE - 1, v)


cdef inline void _tuple_put(tuple t, Py_ssize_t i, object x):
    Py_INCREF(x)  # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(t, i, x)


cdef list _untracked_keys(dict bypart, object partition):
    """A partition's keys, copied for a sweep to walk while parts go, and
    kept from the collector (a list of keys is never in a cycle): a young
    list of a million keys made the next collection walk all of them, 0.3 s."""
    cdef list keys = list(bypart.get(partition, ()))
    PyObject_GC_UnTrack(keys)
    return keys


cdef inline int _match_len(PlanRT p, Env* env) noexcept:
    """Events in the match bound in env: one per positive component, all of
    a Kleene component's."""
    cdef int k, c, n = 0
    for k in range(p.npos):
        c = p.pos[k]
        n += env.klen[c] if p.kleene[c] else 1
    return n


def _held_order(item):
    return item[0]


cdef class _Sweep:
    """Where one plan's sweep of idle parts stands (CythonEngine._sweep_slice)."""

    def __init__(self, list partitions, Py_ssize_t n, i64 started):
        self.partitions = partitions
        self.partition = None
        self.keyed = None
        self.pos = 0
        self.n = n
        self.done = 0
        self.started = started


cdef class _Group:
    """Events of one type that pass one set of pushed-down filters; shared
    by every (plan, component) with the same filters (evaluated once)."""

    def __init__(self, PlanRT rep, int comp, list filters):
        self.rep = rep
        self.comp = comp
        self.filters = filters
        self.members = []


cdef class _AnSpec:
    """The active-node table of one (type, equivalence attributes): events
    of the type are offered to the plans registered in it for their key
    ({partition: {key: {slot: component mask}}}, _an_register)."""

    cdef tuple cols     # the type's columns of the key attributes
    cdef int n          # how many (0: no key)
    cdef dict table
    cdef list slots     # the plans registered
    # the table's dict of the partition last looked up (None: it had none),
    # valid while the engine's _an_version is `version`: consecutive events
    # mostly share a partition (a transaction's), and a big int's hash and
    # lookup per spec and event cost more than the rest of the offer
    cdef i64 at
    cdef object keyed
    cdef i64 version

    def __init__(self, tuple cols, int n):
        self.cols = cols
        self.n = n
        self.table = {}
        self.slots = []
        self.version = -1


cdef object _LO = -(2**63), _HI = 2**64 - 1  # tagged: msgpack's integers


cdef object _encode_key(object key):
    """tagged.encode of an equivalence key: an int, or a tuple of ints
    (several attributes; a string is the 1-tuple of its code)."""
    cdef object v
    if type(key) is int:
        if _LO <= key <= _HI:
            return key
    elif type(key) is tuple:
        for v in <tuple> key:
            if type(v) is not int or not (_LO <= v <= _HI):
                return tagged.encode(key)
        return {"$t": list(key)}
    return tagged.encode(key)


cdef object _NOT_INTS = object()


cdef object _int_lists(object v):
    """A copy of v when it is an int in msgpack's range or a list of such
    (nested: skip-till-next-match runs are lists of row ids), which
    tagged.encode gives back as they are; _NOT_INTS otherwise."""
    cdef list out
    if type(v) is int:
        return v if _LO <= v <= _HI else _NOT_INTS
    if type(v) is not list:
        return _NOT_INTS
    out = []
    for x in <list> v:
        x = _int_lists(x)
        if x is _NOT_INTS:
            return _NOT_INTS
        out.append(x)
    return out


cdef object _encode_held(object v):
    """tagged.encode of runs, pending, ready or held."""
    if type(v) is tuple and not v:
        return {"$t": []}
    found = _int_lists(v)
    return tagged.encode(v) if found is _NOT_INTS else found


cdef inline bint _as_i64(object x, i64* out):
    """Is x an int in int64's range? Its value goes to out."""
    cdef int overflow = 0
    if type(x) is not int:
        return False
    out[0] = PyLong_AsLongLongAndOverflow(x, &overflow)
    return overflow == 0


cdef object _key_columns(list keys):
    """[arity, int64 bytes] of the keys when they are all ints (arity 0) or
    all tuples of ints of one arity (LR's (vid, lane, pos)): one byte string
    instead of a list per key for msgpack to walk; None otherwise."""
    cdef Py_ssize_t n = len(keys), i, j, a
    cdef i64[::1] v
    cdef i64 x
    cdef tuple t
    if n == 0:
        return None
    first = keys[0]
    if type(first) is int:
        a = 0
    elif type(first) is tuple and len(<tuple> first) > 0:
        a = len(<tuple> first)
    else:
        return None
    arr = np.empty(n * (a if a > 0 else 1), dtype=np.int64)
    v = arr
    for i in range(n):
        k = keys[i]
        if a == 0:
            if not _as_i64(k, &x):
                return None
            v[i] = x
            continue
        if type(k) is not tuple or len(<tuple> k) != a:
            return None
        t = <tuple> k
        for j in range(a):
            if not _as_i64(t[j], &x):
                return None
            v[i * a + j] = x
    return [a, arr.tobytes()]


cdef inline bint _empty(object v):
    """v == () (what a part holds when it holds nothing of that kind)."""
    return type(v) is tuple and not v


def _fit_rows(comp):
    """A function (plan id, stack state) -> the state with rows of the
    component's layout. States written before layouts were per component
    keep every attribute of the types (`full_layout`): their columns are
    picked by name. The engine reads rows at the layout's width unchecked,
    so any other width is refused."""
    width = len(comp.layout)
    full = len(comp.full_layout)
    pick = np.array([comp.full_layout.index(a) for a in comp.layout], dtype=np.intp)

    def fit(pid, state):
        w, base, tsb, seqb, valsb, kindsb = state
        if w == width or not tsb:  # (an empty stack reads no row at any width)
            return state
        if w != full:
            raise ValueError(f"engine state of {pid}: rows of {w} attributes, the plan stores "
                             f"{width} ({', '.join(comp.layout)}) of {comp.var}")
        m = len(tsb) // 8
        vals = np.frombuffer(valsb, dtype=np.int64).reshape(m, w)[:, pick]
        kinds = np.frombuffer(kindsb, dtype=np.uint8).reshape(m, w)[:, pick]
        return (width, base, tsb, seqb,
                np.ascontiguousarray(vals).tobytes() if width else b"",
                np.ascontiguousarray(kinds).tobytes() if width else b"")
    return fit


cdef struct _Buf:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int _put(_Buf* b, const void* src, Py_ssize_t n) except -1:
    """Append n bytes to a growing buffer (doubling)."""
    cdef Py_ssize_t cap
    cdef char* grown
    if b.len + n > b.cap:
        cap = max(2 * b.cap, b.len + n, 4096)
        grown = <char*> realloc(b.data, cap)
        if grown == NULL:
            raise MemoryError()
        b.data, b.cap = grown, cap
    if n:
        memcpy(b.data + b.len, src, n)
    b.len += n
    return 0


cdef inline int _put_i64(_Buf* b, i64 v) except -1:
    return _put(b, &v, sizeof(i64))


cdef bint _put_plain_runs(object runs, _Buf* bufs, i64 part) except -1:
    """Append a part's runs to bufs[0..3] (per run its part and entry count,
    per entry its row count, then the row ids) when they are a non-empty
    list of runs, each a list of entries, each a list of int64 row ids (what
    skip_till_next_match keeps); else leave bufs as they were, False."""
    cdef Py_ssize_t marks[4]
    cdef i64 x
    cdef int k
    if type(runs) is not list or not runs:
        return False
    for k in range(4):
        marks[k] = bufs[k].len
    for run in <list> runs:
        if type(run) is not list:
            break
        _put_i64(&bufs[0], part)
        _put_i64(&bufs[1], len(<list> run))
        for entry in <list> run:
            if type(entry) is not list:
                break
            _put_i64(&bufs[2], len(<list> entry))
            for y in <list> entry:
                if not _as_i64(y, &x):
                    break
                _put_i64(&bufs[3], x)
            else:
                continue
            break
        else:
            continue
        break
    else:
        return True
    for k in range(4):  # not plain: undo
        bufs[k].len = marks[k]
    return False


cdef bytes _take(_Buf* b):
    if b.len == 0:
        out = b""
    else:
        out = PyBytes_FromStringAndSize(b.data, b.len)
    free(b.data)
    b.data, b.len, b.cap = NULL, 0, 0
    return out


cdef object _encode_block(int ncomp, dict keyed):
    """A plan's parts (one alternative, one partition) column-wise; see
    snapshot(). None when a component's stacks differ in width (a follower's
    prefix reads its leader's stacks): one width per component is stored.
    One typed pass over the parts into growing buffers: at LR's peak a plan
    holds ~10^5 parts scattered in memory, and each is touched once."""
    cdef Part part
    cdef Stack s
    cdef Py_ssize_t n = len(keyed), i, c, m, w
    cdef i64[:, ::1] counts = np.zeros((ncomp, n), dtype=np.int64)
    cdef i64[:, ::1] bases = np.zeros((ncomp, n), dtype=np.int64)
    cdef _Buf runs[4]
    cdef _Buf* cols = <_Buf*> calloc(4 * ncomp if ncomp else 1, sizeof(_Buf))
    cdef int widths[MAXC]
    if cols == NULL:
        raise MemoryError()
    if ncomp > MAXC:  # compile_plans refuses such plans; widths has MAXC slots
        free(cols)
        raise ValueError(f"a plan of {ncomp} components; at most {MAXC}")
    memset(runs, 0, sizeof(runs))
    memset(widths, 0, sizeof(widths))
    extras = []
    try:
        i = 0
        for part in keyed.values():
            if _empty(part.pending) and _empty(part.ready) and _empty(part.held) \
                    and _put_plain_runs(part.runs, runs, i):
                pass
            elif not (_empty(part.runs) and _empty(part.pending) and _empty(part.ready)
                      and _empty(part.held)):
                extras.append([i, [_encode_held(part.runs), _encode_held(part.pending),
                                   _encode_held(part.ready), _encode_held(part.held)]])
            for c in range(ncomp):
                s = <Stack> part.stacks[c]
                if i == 0:
                    widths[c] = s.width
                elif widths[c] != s.width:
                    return None
                m = s.n - s.head
                counts[c, i] = m
                bases[c, i] = s.base + s.head
                if m == 0:
                    continue
                w = s.width
                _put(&cols[4 * c], s.ts + s.head, m * sizeof(i64))
                _put(&cols[4 * c + 1], s.seq + s.head, m * sizeof(i64))
                if w > 0:
                    _put(&cols[4 * c + 2], s.vals + s.head * w, m * w * sizeof(Cell))
                    _put(&cols[4 * c + 3], s.kinds + s.head * w, m * w * sizeof(u8))
            i += 1
        comps = [[widths[c], _take(&cols[4 * c]), _take(&cols[4 * c + 1]),
                  _take(&cols[4 * c + 2]), _take(&cols[4 * c + 3])] for c in range(ncomp)]
        block = {"extras": extras, "counts": np.asarray(counts).tobytes(),
                 "bases": np.asarray(bases).tobytes(), "comps": comps,
                 "runs": [_take(&runs[k]) for k in range(4)]}
    finally:
        for k in range(4):
            free(runs[k].data)
        for k in range(4 * ncomp):
            free(cols[k].data)
        free(cols)
    keys = list(keyed)
    columns = _key_columns(keys)
    if columns is None:
        block["keys"] = [_encode_key(k) for k in keys]
    else:
        block["key_arity"], block["key_ints"] = columns
    return block


cdef list _raw_alt(PlanRT p, dict keyed):
    """[alternative, [(key, [stack state, ...], runs, pending, ready, held)]]:
    state format 3 before tagging."""
    cdef Part part
    cdef Stack s
    return [p.alt, [(key, [s.state() for s in part.stacks], part.runs, part.pending,
                     part.ready, part.held) for key, part in keyed.items()]]


def _decode_alts(state):
    """[(alternative, [(key, [stack state, ...], runs, pending, ready, held)])]
    of a plan's stored state: format 5 or 4 (snapshot()) or 3 (tagged lists)."""
    if not (isinstance(state, dict) and state.get("v") in (4, 5)):
        return tagged.decode(state)
    return [(alt, _decode_block(block)) for alt, block in state["alts"]]


def _decode_keys(block):
    if "keys" in block:
        return [tagged.decode(k) for k in block["keys"]]
    a = int(block["key_arity"])
    ints = np.frombuffer(block["key_ints"], dtype=np.int64)
    if a == 0:
        return ints.tolist()
    if ints.shape[0] % a:
        raise ValueError("engine state: key columns do not match their arity")
    return [tuple(k) for k in ints.reshape(-1, a).tolist()]


def _decode_runs(block, Py_ssize_t n):
    """{part index: runs} of the flattened runs (format 5)."""
    cdef Py_ssize_t r, e, k, ei = 0, ii = 0
    if "runs" not in block:
        return {}
    run_part, run_len, entry_len, rows = [np.frombuffer(b, dtype=np.int64).tolist()
                                          for b in block["runs"]]
    if len(run_part) != len(run_len) or sum(run_len) != len(entry_len) \
            or sum(entry_len) != len(rows) or any(not 0 <= i < n for i in run_part):
        raise ValueError("engine state: flattened runs do not add up")
    out = {}
    for r in range(len(run_part)):
        run = []
        for e in range(run_len[r]):
            k = entry_len[ei]
            ei += 1
            run.append(rows[ii:ii + k])
            ii += k
        out.setdefault(run_part[r], []).append(run)
    return out


def _decode_block(block):
    cdef Py_ssize_t n, ncomp, i, c, m, w
    keys = _decode_keys(block)
    n = len(keys)
    comps = block["comps"]
    ncomp = len(comps)
    counts = np.frombuffer(block["counts"], dtype=np.int64)
    bases = np.frombuffer(block["bases"], dtype=np.int64)
    if counts.shape[0] != ncomp * n or bases.shape[0] != ncomp * n:
        raise ValueError("engine state: part counts do not match the keys")
    counts = counts.reshape(ncomp, n).tolist()
    bases = bases.reshape(ncomp, n).tolist()
    extras = {int(i): tagged.decode(x) for i, x in block["extras"]}
    for i, runs in _decode_runs(block, n).items():
        if i in extras:
            raise ValueError("engine state: a part's runs are stored twice")
        extras[i] = (runs, (), (), ())
    starts = [0] * ncomp
    parts = []
    for i in range(n):
        stacks = []
        for c in range(ncomp):
            w, tsb, seqb, valsb, kindsb = comps[c]
            m = counts[c][i]
            a = starts[c]
            starts[c] = a + m
            stacks.append((w, bases[c][i], tsb[a * 8:(a + m) * 8], seqb[a * 8:(a + m) * 8],
                           valsb[a * w * 8:(a + m) * w * 8], kindsb[a * w:(a + m) * w]))
        runs, pending, ready, held = extras.get(i, ((), (), (), ()))
        parts.append((keys[i], stacks, runs, pending, ready, held))
    return parts


cdef bint _ascending(i64[::1] seq):
    """Whether seq never decreases (a stable sort would keep every place)."""
    cdef Py_ssize_t i
    for i in range(1, seq.shape[0]):
        if seq[i] < seq[i - 1]:
            return False
    return True


cdef inline Py_ssize_t _dst(i64* where, Py_ssize_t i) noexcept:
    return i if where == NULL else where[i]


cdef int _fill_rows(i64[:, ::1] vals, u8[:, ::1] kinds, int[::1] tids, i64[::1] ts,
                    i64[::1] seqs, i64[::1] parts, object where_arr, Py_ssize_t off, int tid,
                    tuple names, object cols) except -1:
    """Write one type's events into the batch matrices, event i at row
    where[off + i] (where None: off + i): one 8-byte cell per value
    (typedefs.pxd): integers as they are, doubles by their bits, interned
    string codes (a negative one: missing), bools as 0/1; a value its null
    mask marks is missing, as is an attribute the columns lack. In C, not
    two numpy assignments per attribute: their fixed cost was a tenth of
    the pipeline (the stage graph calls the engine ~10 times a step)."""
    cdef Py_ssize_t n = len(cols), i, r
    cdef int j
    cdef u8 kind
    cdef i64* where = NULL
    cdef i64[::1] wv
    cdef const i64[::1] a64
    cdef const int[::1] a32
    cdef const signed char[::1] a8
    cdef const u8[::1] nm
    cdef const i64[::1] cts = np.ascontiguousarray(cols.ts, dtype=np.int64)
    cdef const i64[::1] cseq = np.ascontiguousarray(cols.seq, dtype=np.int64)
    cdef const i64[::1] cpart = np.ascontiguousarray(cols.partition, dtype=np.int64)
    if where_arr is not None:
        wv = where_arr
        where = &wv[0]
    if vals.shape[1] < len(names) or cts.shape[0] != n or cseq.shape[0] != n or \
            cpart.shape[0] != n or off + n > vals.shape[0]:
        raise ValueError("event columns do not fit the batch matrices")
    for i in range(n):
        r = _dst(where, off + i)
        tids[r] = tid
        ts[r] = cts[i]
        seqs[r] = cseq[i]
        parts[r] = cpart[i]
    columns = cols.columns
    nulls = cols.nulls
    for j in range(vals.shape[1]):
        # the matrices come uninitialised (process): a cell no column of this
        # type fills is missing, written as a zeroed matrix had it
        arr = columns.get(names[j]) if j < len(names) else None
        if arr is None:
            for i in range(n):
                r = _dst(where, off + i)
                vals[r, j] = 0
                kinds[r, j] = K_MISSING
            continue
        if len(arr) != n:
            raise ValueError(f"column {names[j]!r} has {len(arr)} rows, not {n}")
        dk = arr.dtype
        if dk == np.int32:  # interned string codes
            a32 = np.ascontiguousarray(arr)
            for i in range(n):
                r = _dst(where, off + i)
                vals[r, j] = a32[i]
                kinds[r, j] = K_STR if a32[i] >= 0 else K_MISSING
        elif dk == np.int8:  # bools
            a8 = np.ascontiguousarray(arr)
            for i in range(n):
                r = _dst(where, off + i)
                vals[r, j] = a8[i]
                kinds[r, j] = K_BOOL
        else:
            if dk.kind == "f":
                a64 = np.ascontiguousarray(arr, dtype=np.float64).view(np.int64)
                kind = K_FLOAT
            else:
                a64 = np.ascontiguousarray(arr, dtype=np.int64)
                kind = K_INT
            for i in range(n):
                r = _dst(where, off + i)
                vals[r, j] = a64[i]
                kinds[r, j] = kind
        m = nulls.get(names[j])
        if m is not None:
            nm = np.ascontiguousarray(m, dtype=np.bool_).view(np.uint8)
            for i in range(n):
                if nm[i]:
                    kinds[_dst(where, off + i), j] = K_MISSING
    return 0


cdef inline bint _equal_to_row(PlanRT p, Stack s, i64 row, const Cell* v, const u8* k) noexcept:
    """Does the event (v, k) hold the values of the stack's row in every
    column of an equal run (PlanRT.runcol), as its `=` conditions test?"""
    cdef int j, c
    cdef const Cell* rv = s.vals + row * s.width
    cdef const u8* rk = s.kinds + row * s.width
    for j in range(p.nrun):
        c = p.runcol[j]
        if not same_value(rk[c], rv[c], k[c], v[c]):
            return False
    return True


def _sharing(cps):
    """Common prefixes (Cayuga thesis ch. 4, shared automaton prefixes), as
    {follower's index in `cps`: (leader's index, shared components)}: a
    plan whose leading positive components (types, pushed filters, layout)
    equal those of an earlier plan with the same window, equivalence and
    skip-till-any-match strategy becomes its follower: it never stores or
    scans those components itself but reads the leader's stacks of the same
    PAIS key, and it is dispatched from its first own component on. The
    stacks of a prefix depend only on the events fed and the prefix itself,
    so sharing them gives the same matches. Plans with an end negation are
    left alone (their pending results pin rows the partner could prune). A
    follower's first own positive component is dispatched eagerly, so
    sharing is only worth it when the constant index can route that one
    (`attr = const`); otherwise the plan keeps its own state and the
    active-node index. Decided on plans compiled shareable (their leading
    components keep every attribute, compile.share_prefix)."""
    cdef int d, dmax
    leaders = {}
    pairs = {}
    for i, cp in enumerate(cps):
        if cp.strategy != 0 or cp.has_end_negation or cp.keyless:
            continue
        dmax = cp.share_prefix
        if dmax == 0:
            continue
        sig = [(cp.within, cp.equivalence)]
        for d in range(dmax):
            sig.append((cp.comps[d].types, cp.comps[d].filter_key))
        q = None
        for d in range(dmax, 0, -1):
            q = leaders.get(tuple(sig[:d + 1]))
            if q is not None:
                break
        if q is not None and cp.comps[cp.pos[d]].const_eq is not None:
            pairs[i] = (q, d)
        elif q is None:
            for d in range(1, dmax + 1):
                leaders[tuple(sig[:d + 1])] = i
    return pairs


cdef class CythonEngine:
    def __cinit__(self, *args, **kwargs):
        self._masks = NULL
        self._hits = NULL
        self._mapp = NULL
        self._kpart = NULL
        self._pcs = NULL
        self._pco = NULL
        self._pfo = NULL
        self._pft = NULL
        self._pc = [None] * _PC
        self._pc_id = <i64*> malloc(_PC * sizeof(i64))
        if self._pc_id == NULL:
            raise MemoryError()
        int_table_init(self._pc_id, _PC)

    def __dealloc__(self):
        free(self._masks)
        free(self._hits)
        free(self._mapp)
        free(self._kpart)
        free(self._pcs)
        free(self._pco)
        free(self._pfo)
        free(self._pft)
        free(self._pc_id)

    cdef _point_maps(self):
        """_maps as raw pointers for _extract (the arrays stay alive in
        _maps): a typed memoryview taken per event cost ~1 µs."""
        cdef int[::1] mv
        cdef Py_ssize_t i
        free(self._mapp)
        self._mapp = <int**> malloc((len(self._maps) + 1) * sizeof(int*))
        if self._mapp == NULL:
            raise MemoryError()
        for i in range(len(self._maps)):
            if self._maps[i] is None:
                self._mapp[i] = NULL
            else:
                mv = self._maps[i]
                self._mapp[i] = &mv[0]

    def __init__(self, plans, share_prefixes=True):
        cdef PlanRT p
        cdef int slot
        self._plans = []
        self._followers = []
        self._by_id = {}
        compiled = []
        for plan in plans:
            if plan.plan_id in self._by_id:
                raise PlanError(f"matcher: plan id {plan.plan_id} is given twice")
            self._by_id[plan.plan_id] = []
            compiled.append((plan, compile_plans(plan)))
        pairs = _sharing([cp for _, cps in compiled for cp in cps]) if share_prefixes else {}
        used = set(pairs) | {leader for leader, _ in pairs.values()}
        for plan, cps in compiled:
            # a plan sharing with none stores only the attributes it reads of
            # its leading components (compile._comp_layout), not all of them
            # (LR LeftSegment: 2 of a report's 10)
            first = len(self._plans)
            if not any([first + k in used for k, _ in enumerate(cps)]) \
                    and any([cp.share_prefix for cp in cps]):
                cps = compile_plans(plan, shareable=False)
            # a plan with AND/OR alternatives runs one PlanRT per alternative
            for cp in cps:
                p = PlanRT(cp, len(self._plans))
                self._plans.append(p)
                self._by_id[plan.plan_id].append(p)
        for slot, (leader, d) in pairs.items():
            p = self._plans[slot]
            p.leader = self._plans[leader]
            p.share = d
            self._followers.append(p)
        self._parts = {p.slot: {} for p in self._plans}
        self._kdict = [None] * len(self._plans)
        self._kpart = <i64*> malloc((len(self._plans) + 1) * sizeof(i64))
        if self._kpart == NULL:
            raise MemoryError()
        self._udf_plans = [p for p in self._plans if p.functions]
        # slot -> {part: None}: insertion-ordered, so end-negation results
        # are released in the same order by every engine fed the same input
        self._waiting = {p.slot: {} for p in self._plans}
        self._sweeps = {}
        self.sweep_min = _SWEEP_MIN
        self._pool = None
        self._type_cols = {}
        for p in self._plans:
            for t, schema in p.cp.plan.schemas.items():
                cols = set(self._type_cols.get(t, ())) | set(schema)
                self._type_cols[t] = tuple(sorted(cols))
            for comp in p.cp.comps:
                for t in comp.types:
                    self._type_cols.setdefault(t, ())
        self._tid = {t: i for i, t in enumerate(sorted(self._type_cols))}
        self._ntypes = len(self._tid) + 1  # last id: types no plan names
        self._maps = [None] * (len(self._plans) * MAXC * self._ntypes)
        for p in self._plans:
            for c, comp in enumerate(p.cp.comps):
                for t in comp.types:
                    cols = self._type_cols[t]
                    mp = [cols.index(a) if a in cols else -1 for a in comp.layout]
                    if mp != list(range(len(mp))):
                        self._maps[(p.slot * MAXC + c) * self._ntypes + self._tid[t]] = \
                            np.array(mp or [0], dtype=np.int32)
        self._point_maps()
        self._strict = [p for p in self._plans if p.strategy == 2]
        # partition contiguity: every event of a plan's types reaches it, so
        # one that no component takes still ends its key's runs; `comp` is
        # a component of that type, whose layout gives the event's key
        self._pcont = [[] for _ in range(self._ntypes)]
        for p in self._plans:
            if p.strategy == 3:
                seen = set()
                for c, comp in enumerate(p.cp.comps):
                    for t in comp.types:
                        if t not in seen:
                            seen.add(t)
                            self._pcont[self._tid[t]].append((p, c))
        # the same as slots in C arrays for the event loop: per type id t,
        # _pcs[_pco[t]:_pco[t + 1]], the strict plans' after them
        # (_pco[_ntypes]:_pco[_ntypes + 1]); iterating the lists of tuples
        # counted references per event and entry
        cdef Py_ssize_t npc = sum([len(x) for x in self._pcont]) + len(self._strict), at = 0
        cdef int ti
        self._pcs = <int*> malloc((npc + 1) * sizeof(int))
        self._pco = <int*> malloc((self._ntypes + 2) * sizeof(int))
        if self._pcs == NULL or self._pco == NULL:
            raise MemoryError()
        for ti in range(self._ntypes):
            self._pco[ti] = at
            for q, _c in self._pcont[ti]:
                self._pcs[at] = (<PlanRT> q).slot
                at += 1
        self._pco[self._ntypes] = at
        for q in self._strict:
            self._pcs[at] = (<PlanRT> q).slot
            at += 1
        self._pco[self._ntypes + 1] = at
        self._type_groups = [[] for _ in range(self._ntypes)]
        self._type_index = [[] for _ in range(self._ntypes)]
        self._an_specs = [[] for _ in range(self._ntypes)]
        self._an_tables = {}
        self._act_cache = {}
        self._masks = <long*> malloc((len(self._plans) + 1) * sizeof(long))
        self._hits = <int*> malloc((len(self._plans) + 1) * sizeof(int))
        for slot in range(len(self._plans) + 1):
            self._masks[slot] = 0
        self._nhit = 0
        self._columnar = False
        self._emitted = 0
        self._sink_of = {}
        self._sinks = []
        for p in self._plans:
            k = (p.plan_id, str(p.output_type))
            if k not in self._sink_of:
                self._sink_of[k] = MatchSink(p.plan_id, str(p.output_type),
                                                 tuple([name for name, _prog in p.outputs]))
            self._sinks.append(self._sink_of[k])
        self._mark_fast_paths()
        self._prefetch_targets()

    def _prefetch_targets(self):
        """_pfo/_pft (_prefetch's table): every plan keyed by one attribute
        (a Part per key), per type one of its components takes, with the
        type column its key is read from."""
        cdef PlanRT p
        cdef int c, j, src, ti, at = 0
        cdef const int* mp
        per = [[] for _ in range(self._ntypes)]
        for p in self._plans:
            if p.keyless or p.neq != 1 or p.solo:
                continue
            for c in range(p.ncomp):
                j = p.eqcol[c][0]
                if j < 0:
                    continue
                for t in p.cp.comps[c].types:
                    ti = self._tid[t]
                    mp = self._mapp[(p.slot * MAXC + c) * self._ntypes + ti]
                    src = j if mp == NULL else mp[j]
                    if src >= 0 and all(slot != p.slot for slot, _ in per[ti]):
                        per[ti].append((p.slot, src))
        n = sum([len(x) for x in per])
        free(self._pfo)
        free(self._pft)
        self._pfo = <int*> malloc((self._ntypes + 1) * sizeof(int))
        self._pft = <int*> malloc((2 * n + 1) * sizeof(int))
        if self._pfo == NULL or self._pft == NULL:
            raise MemoryError()
        for ti in range(self._ntypes):
            self._pfo[ti] = at
            for slot, src in per[ti]:
                self._pft[2 * at] = slot
                self._pft[2 * at + 1] = src
                at += 1
        self._pfo[self._ntypes] = at

    def _prefetch_table(self):
        """{event type: [(plan id, key attribute)]}: what _prefetch looks up."""
        cdef int h
        out = {}
        for t, ti in self._tid.items():
            for h in range(self._pfo[ti], self._pfo[ti + 1]):
                p = <PlanRT> self._plans[self._pft[2 * h]]
                out.setdefault(t, []).append((p.plan_id, self._type_cols[t][self._pft[2 * h + 1]]))
        return out

    def _mark_fast_paths(self):
        """Plans of one positive component without key, negation, Kleene,
        timeout or after-match skip, whose WHERE is all pushed down to the
        component's filters (compile.py: a conjunct reading one non-Kleene
        component is): each event reaching them is one match, and their
        Part's only stack is pushed and popped around it (_any), so _on_plan
        makes the match straight from the event (_solo). Prefix sharing's
        plans keep the general path."""
        cdef PlanRT p
        cdef int c
        shared = {id(p) for p in self._followers} | {id(p.leader) for p in self._followers}
        for p in self._plans:
            p.solo = 1 if (p.ncomp == 1 and p.npos == 1 and not p.negated[0]
                           and not p.kleene[0] and p.neq == 0 and not p.keyless
                           and p.strategy == 0 and not p.has_end_neg and not p.skip
                           and not p.has_timeout and not p.has_optional and not p.dead
                           and p.checks_n[0] == 0 and id(p) not in shared) else 0
            # Run strategies: without a Part a key has no run, so an event
            # reaching neither the first component nor a negation whose
            # events are kept without a run (non-killing) binds nothing and
            # is not stored, and the step's trim would drop the Part it made
            # (LR TollCharge: each LeftSegment and SegmentEntry of a car
            # made and dropped one). Such an event skips the Part (_on_plan).
            p.startmask = 1 << p.pos[0]
            for c in range(p.ncomp):
                if p.negated[c] and not p.killneg[c]:
                    p.startmask |= 1 << c
            # The last positive component's row lives only while _any makes
            # the matches it ends (pushed, then popped): one Stack per plan
            # serves every Part, instead of one made per Part at its first
            # such event (LR: LeftSegment's and the joins' second event of
            # each car, 2 % of the embedded pipeline). Not with prefix sharing
            # (a follower reads its leader's stacks) nor where the row stays:
            # Kleene, end negation, after-match skip, timeout, run strategies.
            c = p.pos[p.npos - 1] if p.npos > 0 else -1
            p.last_stack = new_stack(p.width[c]) if (
                c >= 0 and p.strategy == 0 and not p.kleene[c] and not p.negated[c]
                and not p.has_end_neg and not p.skip and not p.has_timeout
                and not p.has_optional and not p.dead and id(p) not in shared) else None
            p.needs_part = 1 if (p.strategy in (1, 3) and not p.keyless and not p.has_end_neg
                                 and not p.has_optional and not p.has_timeout and not p.skip
                                 and not p.dead and p.leader is None
                                 and (p.nkill or p.strategy >= 2)) else 0

    def shared_prefixes(self):
        """{follower plan id: (leader plan id, shared components)}."""
        cdef PlanRT p
        return {p.plan_id: ((<PlanRT> p.leader).plan_id, p.share) for p in self._followers}

    def _unshare(self):
        """Give every follower its own copy of the shared stacks and stop
        sharing for good (plans of one group were fed or discarded apart)."""
        cdef PlanRT p
        cdef Part part, lp
        cdef Stack s
        if not self._followers:
            return
        for p in self._followers:
            for partition in list(self._parts[(<PlanRT> p.leader).slot]):
                self._materialize(p, partition)
            for partition, keyed in self._parts[p.slot].items():
                for key, part in keyed.items():
                    lp = self._leader_part(p, partition, key)
                    src = (lp if lp is not None else part).stacks[:p.share]
                    part.stacks = tuple([Stack.from_state(s.state()) for s in src]) + \
                        part.stacks[p.share:]
        for p in self._followers:
            p.leader = None
            p.share = 0
        self._followers = []
        if self._pool is not None:
            self._build_dispatch(self._pool)

    def _materialize(self, PlanRT p, partition):
        """Give follower p a Part for every key its leader holds in this
        partition, pointing at the shared stacks (before its state is
        copied out: it owns that prefix state even where no event of its
        own reached it yet)."""
        cdef Part part
        leader_keyed = self._parts[(<PlanRT> p.leader).slot].get(partition)
        if not leader_keyed:
            return
        keyed = self._parts[p.slot].setdefault(partition, {})
        for key in leader_keyed:
            part = keyed.get(key)
            if part is None:
                part = new_part(p, (partition, key))
                keyed[key] = part
            self._relink(p, part, partition, key)

    cdef Part _leader_part(self, PlanRT p, object partition, object key):
        keyed = (<dict> self._parts[(<PlanRT> p.leader).slot]).get(partition)
        if keyed is None:
            return None
        return (<dict> keyed).get(key)

    cdef _relink(self, PlanRT p, Part part, object partition, object key):
        # the leader's Part of this key may have been dropped (empty) and
        # made anew since: point at its current stacks. Without a leader Part
        # the old shared stacks are empty (nobody pushes into them).
        cdef Part lp = self._leader_part(p, partition, key)
        cdef int c
        if lp is None:
            return
        # every shared stack: the leader's first push into a component
        # replaces its shared empty stack (own_stack)
        for c in range(p.share):
            if part.stacks[c] is not lp.stacks[c]:
                part.stacks = lp.stacks[:p.share] + part.stacks[p.share:]
                return

    def _build_dispatch(self, pool):
        """Group (type, pushed filters) across plans; constant equality
        filters go into a hash index (Cayuga FR index) so an event only
        reaches the groups its value can pass."""
        cdef PlanRT p
        groups = {}
        for p in self._plans:
            p.intern(pool)
        specs = {}
        self._an_tables = {}
        for p in self._plans:
            # types whose every event reaches the plan anyway, through a first
            # component without filters: an active-node lookup for its later
            # components would only repeat the part lookup _on_plan makes
            # (LR LeftSegment: SEQ(p, r) on every report), so they are
            # offered directly and _any / _on_plan check the earlier stack
            unfiltered_first = set()
            for c, comp in enumerate(p.cp.comps):
                if p.rank[c] == 0 and not p.negated[c] and not comp.filters and \
                        comp.const_eq is None:
                    unfiltered_first.update(comp.types)
            for c, comp in enumerate(p.cp.comps):
                if c < p.share:
                    continue  # the leader scans and stores the shared prefix
                eager = comp.types
                if p.strategy == 0 and p.leader is None and not p.keyless and (
                        (not p.negated[c] and p.rank[c] > 0)
                        or (p.negated[c] and p.prevpos[c] >= 0 and not p.has_optional)):
                    # lazy: reached through the active-node index only
                    tables = []
                    eager = [t for t in comp.types if t in unfiltered_first]
                    for t in comp.types:
                        if t in unfiltered_first:
                            continue
                        cols = self._type_cols[t]
                        if any(a not in cols for a in p.cp.equivalence):
                            continue  # can never satisfy the equivalence test
                        skey = (t, p.cp.equivalence)
                        spec = specs.get(skey)
                        if spec is None:
                            spec = _AnSpec(tuple([cols.index(a) for a in p.cp.equivalence]
                                                 or [0]), len(p.cp.equivalence))
                            specs[skey] = spec
                        (<_AnSpec> spec).slots.append(p.slot)
                        tables.append((<_AnSpec> spec).table)
                    self._an_tables[(p.slot, c)] = tables
                for t in eager:
                    gkey = (t, comp.filter_key)
                    g = groups.get(gkey)
                    if g is None:
                        g = _Group(p, c, list(comp.filters))
                        g.mapping = (t, comp.const_eq)
                        groups[gkey] = g
                    g.members.append((p, c))
        index_by_type = {}
        self._type_groups = [[] for _ in range(self._ntypes)]
        for (t, _fk), g in groups.items():
            g.slots = np.array([m[0].slot for m in g.members], dtype=np.int32)
            g.comps = np.array([m[1] for m in g.members], dtype=np.int32)
            const_eq = g.mapping[1]
            g.mapping = None
            cols = self._type_cols[t]
            if const_eq is not None and const_eq[0] in cols:
                attr, value = const_eq
                # the key of `attr = const` as key_of gives it for the event's value
                key = (pool.code(value),) if isinstance(value, str) else value
                col = cols.index(attr)
                idx = index_by_type.setdefault(t, {})
                idx.setdefault(col, {}).setdefault(key, []).append(g)
            else:
                self._type_groups[self._tid[t]].append(g)
        self._an_specs = [[] for _ in range(self._ntypes)]
        for (t, _eq), spec in specs.items():
            self._an_specs[self._tid[t]].append(spec)
        self._groups_all = self._type_groups
        self._specs_all = self._an_specs
        self._act_cache = {}
        self._relink_an()
        self._type_index = [[] for _ in range(self._ntypes)]
        for t, d in index_by_type.items():
            self._type_index[self._tid[t]] = list(d.items())

    # -- protocol ---------------------------------------------------------

    def _use_pool(self, pool):
        """The StringPool whose codes string values are (every batch's,
        `restore`'s): constants interned in it, the dispatch built on it."""
        if pool is not self._pool:
            # stored rows hold interned codes of the previous pool
            if self._pool is not None and self.state_size() > 0:
                raise PlanError("matcher: a batch came with a different StringPool while "
                                "partial matches are held; use one pool per pipeline")
            self._pool = pool
            self._build_dispatch(pool)

    def process(self, batch, active=None):
        cdef PlanRT p
        self._use_pool(batch.strings)
        self._out = []
        if self._columnar:
            self._clear_sinks()
        self._use_act = active is not None
        if self._use_act:
            # the matcher calls with a few distinct active sets, over and
            # over: their masks and dispatch lists are kept (dropped with
            # the dispatch they were made of, _build_dispatch)
            hit = self._act_cache.get(tuple(active))
            if hit is not None:
                self._act, self._type_groups, self._an_specs = hit
            else:
                act = np.zeros(len(self._plans) + 1, dtype=np.uint8)
                for pid in active:
                    for p in self._by_id.get(pid, ()):
                        act[p.slot] = 1
                self._act = act
                for p in self._followers:
                    if act[p.slot] != act[(<PlanRT> p.leader).slot]:
                        self._unshare()
                        break
                self._for_active()
                if len(self._act_cache) >= 64:
                    self._act_cache.clear()
                self._act_cache[tuple(active)] = (self._act, self._type_groups, self._an_specs)
        else:
            self._for_active()
        # only types some plan reads (strict contiguity: every event counts)
        chosen = []  # (type id, its attribute names, its columns)
        width = 1
        ne = 0
        for t, cols in batch.by_type.items():
            tid = self._tid.get(t)
            if tid is None:
                if not self._strict:
                    continue
                tid = self._ntypes - 1
                names = ()
            else:
                if not (self._strict or self._type_groups[tid] or self._type_index[tid]
                        or self._an_specs[tid]):
                    continue
                names = self._type_cols[t]
            n = len(cols)
            if n == 0:
                continue
            chosen.append((tid, names, cols))
            width = max(width, len(names))
            ne += n
        if not chosen:
            return self._take() if self._columnar else []
        # merge the types into one arrival-ordered stream: each event's row
        # in it (`where`), by seq; rows already in seq order (one type, as
        # the stage graph mostly calls) keep their places without a sort
        seqs = [np.asarray(cols.seq, dtype=np.int64) for _tid, _names, cols in chosen]
        all_seq = seqs[0] if len(seqs) == 1 else np.concatenate(seqs)
        if _ascending(all_seq):
            where = None
        else:
            order = np.argsort(all_seq, kind="stable")
            where = np.empty(ne, dtype=np.int64)
            where[order] = np.arange(ne, dtype=np.int64)
        # every cell is written by _fill_rows: no zeroing (calloc's memset
        # of these was 1.3 % of the embedded LR pipeline)
        ev_vals = np.empty((ne, width), dtype=np.int64)
        ev_kinds = np.empty((ne, width), dtype=np.uint8)
        ev_tid = np.empty(ne, dtype=np.int32)
        ev_ts = np.empty(ne, dtype=np.int64)
        ev_seq = np.empty(ne, dtype=np.int64)
        ev_part = np.empty(ne, dtype=np.int64)
        off = 0
        for tid, names, cols in chosen:
            _fill_rows(ev_vals, ev_kinds, ev_tid, ev_ts, ev_seq, ev_part, where, off, tid,
                       names, cols)
            off += len(cols)
        self._run_batch(ev_vals, ev_kinds, ev_tid, ev_ts, ev_seq, ev_part)
        out = self._out
        self._out = []
        return self._take() if self._columnar else out

    def process_columns(self, batch, active=None):
        """process, with the matches as a MatchBatch (NumPy columns per plan
        and output type, caesar.plans.matches) instead of one DerivedEvent
        each: the same matches in the same order (MatchBatch.events()),
        made without a Python object per match."""
        self._columnar = True
        try:
            return self.process(batch, active)
        finally:
            self._columnar = False

    def advance_columns(self, watermark):
        """advance, with the matches as a MatchBatch (see process_columns)."""
        self._columnar = True
        try:
            return self.advance(watermark)
        finally:
            self._columnar = False

    def advance(self, watermark):
        """Release end-negation results whose window closed; sweep state
        older than the window. Parts touched by events are pruned as they
        are touched; the sweep of every part (for those no event reaches any
        more) starts once per window of event time and visits a slice of
        them per call (_sweep_slice), done within a quarter window, so state
        stays within about 2.25 windows and no call stops for all of it.
        (Once per half window, 1.75 windows, was 1.5 % slower on Linear Road,
        session 43: a sweep touches every live part, cold, to find the few
        idle ones, as often as their own events did.) Plans with ON TIMEOUT or an after-match skip sweep every part on
        every call: their timeouts and held matches are outputs, due as soon
        as the watermark passes."""
        cdef PlanRT p
        cdef Part part
        cdef i64 wm = watermark
        out = self._out = []
        if self._columnar:
            self._clear_sinks()
        for p in self._plans:
            waiting = self._waiting[p.slot]
            if waiting:
                for part in list(waiting):
                    keep = []
                    for item in part.ready:
                        if item[0] <= wm:
                            self._put(p, item[1])
                        else:
                            keep.append(item)
                    part.ready = keep or ()
                    keep = []
                    for item in part.pending:
                        if item[0] <= wm:
                            self._put(p, item[1])
                        else:
                            keep.append(item)
                    part.pending = keep or ()
                    if not part.pending and not part.ready:
                        del waiting[part]
            if p.within < 0:
                continue
            if p.has_timeout or p.skip:
                p.last_sweep = wm
                bypart = self._parts[p.slot]
                for partition in list(bypart):
                    self._sweep_keys(p, partition, _untracked_keys(bypart, partition),
                                     wm - p.within)
                continue
            if p.slot not in self._sweeps:
                if wm - p.last_sweep < max(1, p.within):
                    continue
                p.last_sweep = wm
                bypart = self._parts[p.slot]
                self._sweeps[p.slot] = _Sweep(list(bypart),
                                              sum([len(keyed) for keyed in bypart.values()]),
                                              wm)
            self._sweep_slice(p, wm)
        self._out = []
        return self._take() if self._columnar else out

    cdef _sweep_slice(self, PlanRT p, i64 wm):
        """The next slice of plan p's sweep (see advance): its share, by the
        event time passed since the sweep started, of the parts there were
        then. Partitions are visited one at a time, walking their dict where
        the last slice stopped (_sweep_walk)."""
        cdef _Sweep s = self._sweeps[p.slot]
        cdef Py_ssize_t left
        cdef i64 span = max(1, p.within // 4), bound = wm - p.within
        if bound >= self._ts:  # past every event's window (the end of input): all now
            left = s.n + sum([len(keyed) for keyed in self._parts[p.slot].values()])
        elif wm - s.started >= span:  # due: the rest, parts made since too, in a few slices
            left = max(s.n - s.done, s.n // 8)
        else:  # Python ints: n times a long window may not fit 64 bits
            left = (<object> s.n) * (wm - s.started + 1) // span - s.done
            if left <= 0:  # a slice of at least sweep_min ran ahead of its share
                return
        left = max(left, self.sweep_min)
        s.done += left
        while left > 0:
            if s.keyed is None:
                if not s.partitions:
                    del self._sweeps[p.slot]
                    return
                s.partition = s.partitions.pop()
                s.keyed = self._parts[p.slot].get(s.partition)
                s.pos = 0
                continue
            if self._parts[p.slot].get(s.partition) is not s.keyed:
                s.keyed = None  # dropped since the last slice (a new dict is a later part's)
                continue
            left -= self._sweep_walk(p, s, <dict> s.keyed, left, bound)

    cdef Py_ssize_t _sweep_walk(self, PlanRT p, _Sweep s, dict keyed, Py_ssize_t left,
                                i64 bound) except -1:
        """Up to `left` parts of `keyed` from s.pos on, pruned to `bound`
        unless an event reached them after it (that event pruned them); the
        empty ones are dropped after the walk, the partition once it holds
        none. No copy of the keys: a copy took a reference to every key (a
        cache miss each), 20 % of the sweep at LR's peak. Parts added between
        slices come after the position (the dict keeps insertion order) or,
        after a resize moved the entries, some are passed over: they wait for
        the next sweep, as parts made during a sweep always did."""
        cdef Part part
        cdef PyObject* k
        cdef PyObject* v
        cdef Py_ssize_t pos = s.pos, n = 0
        cdef list dead = []
        self._partition = s.partition
        while n < left:
            if not PyDict_Next(keyed, &pos, &k, &v):
                s.keyed = None
                break
            n += 1
            part = <Part> v
            if part.touched <= bound and self._prune(p, part, bound):
                dead.append(<object> k)
        s.pos = pos
        for key in dead:
            del keyed[key]
            self._an_forget(p, s.partition, key)
        if not keyed:
            if (<dict> self._parts[p.slot]).get(s.partition) is keyed:
                self._drop_partition(p, s.partition)
            s.keyed = None
        return n

    cdef bint _prune(self, PlanRT p, Part part, i64 bound) except -1:
        """Prune one part to `bound` (its runs ended, its held matches
        released first); True when nothing is left in it."""
        cdef Stack st
        if part.runs:  # before pruning: runs point into the stacks
            self._expire_runs(p, part, bound)
        if part.held:
            self._release(p, part)
        for st in part.stacks:
            st.prune(bound)
        return part.empty()

    cdef int _sweep_keys(self, PlanRT p, object partition, list keys, i64 bound) except -1:
        """Prune every one of plan p's parts of `keys` in `partition` to
        `bound`, touched or not (a sweep that ends runs, ON TIMEOUT or
        after-match skip: its timeouts are outputs); drop the empty ones, and
        the partition once it holds none."""
        cdef Part part
        keyed = self._parts[p.slot].get(partition)
        if keyed is None:
            return 0
        self._partition = partition
        for key in keys:
            part = keyed.get(key)
            if part is not None and self._prune(p, part, bound):
                del keyed[key]
                self._an_forget(p, partition, key)
        if not keyed:
            self._drop_partition(p, partition)
        return 0

    def discard(self, plan_ids, partition):
        cdef PlanRT p
        if self._followers:
            ids = set(plan_ids)
            for p in self._followers:
                if (p.plan_id in ids) != ((<PlanRT> p.leader).plan_id in ids):
                    self._unshare()
                    break
        for pid in plan_ids:
            for p in self._by_id.get(pid, ()):
                keyed = self._drop_partition(p, partition)
                for key, part in (keyed or {}).items():
                    self._an_forget(p, partition, key)
                    self._waiting[p.slot].pop(part, None)

    def _keyed_parts(self, partition):
        """{plan id: [(PlanRT of an alternative, {equivalence key: Part})]} of
        the plans holding something in this partition (followers materialized)."""
        cdef PlanRT p
        cdef Part part
        out = {}
        for p in self._plans:
            if p.leader is not None:
                self._materialize(p, partition)
                for key, part in self._parts[p.slot].get(partition, {}).items():
                    self._relink(p, part, partition, key)
            keyed = self._parts[p.slot].get(partition)
            if keyed:
                out.setdefault(p.plan_id, []).append((p, keyed))
        return out

    def snapshot(self, partition):
        """This partition's run state as plain data (services/store/state_format.py):
        {plan id: {"v": 5, "alts": [[alternative, block], ...]}}, a block holding
        the plan's parts column-wise: their equivalence keys (one int64 byte
        string when they are ints or int tuples of one arity, else tagged),
        the runs of the parts holding only runs of row ids flattened into four
        int64 byte strings, the (runs, pending, ready, held) of the other
        parts that hold any, and per component the live rows of every part's
        stack as a few byte strings (row counts and first row ids per part).
        Only plans holding something appear. Format 4 stored a list per key
        and a nested list per run: at LR's peak (260K StoppedCar parts, a run
        each) msgpack walked millions of objects per checkpoint."""
        cdef PlanRT p
        out = {}
        for pid, alts in self._keyed_parts(partition).items():
            blocks = []
            for p, keyed in alts:
                block = _encode_block(p.ncomp, keyed)
                if block is None:  # stacks of several widths: format 3 for this plan
                    blocks = None
                    break
                blocks.append([p.alt, block])
            out[pid] = {"v": STATE_FORMAT, "alts": blocks} if blocks is not None else \
                tagged.encode([_raw_alt(p, keyed) for p, keyed in alts])
        return out

    def _snapshot_raw(self, partition):
        """snapshot() before encoding (tests compare the two encodings)."""
        return {pid: [_raw_alt(p, keyed) for p, keyed in alts]
                for pid, alts in self._keyed_parts(partition).items()}

    def restore(self, partition, state, strings=None):
        """The inverse of snapshot(); plans not in `state` start empty.
        `strings`: the pool the state's string values are codes of (the
        batches'), so that an advance before the next batch compares string
        constants with them (and outputs them) as the engine that wrote it
        did; without it, as soon as a batch brings its pool."""
        cdef PlanRT p
        cdef Part part
        if strings is not None:
            self._use_pool(strings)
        self._unshare()  # restored stacks are per plan
        self.discard([p.plan_id for p in self._plans], partition)
        data = {(pid, alt): parts for pid, alts in state.items()
                for alt, parts in _decode_alts(alts)}
        for (pid, alt), parts in data.items():
            alts = self._by_id.get(pid, ())
            if alt >= len(alts):
                continue
            p = alts[alt]
            keyed = self._parts[p.slot].setdefault(partition, {})
            fits = [_fit_rows(p.cp.comps[c]) for c in range(p.ncomp)]
            for key, stacks, runs, pending, ready, held in parts:
                if len(stacks) != p.ncomp:  # the engine indexes stacks unchecked
                    raise ValueError(f"engine state of {pid}: {len(stacks)} stacks per part, "
                                     f"the plan has {p.ncomp} components")
                part = new_part(p, (partition, key))
                part.stacks = tuple([Stack.from_state(fits[c](pid, s))
                                     for c, s in enumerate(stacks)])
                part.runs = runs
                part.pending = pending
                part.ready = ready
                part.held = held
                keyed[key] = part
                if part.pending or part.ready:
                    self._waiting[p.slot][part] = None
        self._relink_an()

    def overflows(self):
        """{plan id: integer results outside 64 bits so far} (each was
        treated as a missing value); plans without any are left out."""
        cdef PlanRT p
        out = {}
        for p in self._plans:
            if p.overflows:
                out[p.plan_id] = out.get(p.plan_id, 0) + p.overflows
        return out

    def function_failures(self):
        """[(plan id, FunctionFailure)] of user-defined function calls since
        the last call (each made its value missing)."""
        cdef PlanRT p
        out = []
        for p in self._udf_plans:  # plans that call one (a step asks every time)
            if p.failures:
                out += [(p.plan_id, f) for f in p.failures]
                p.failures = []
        return out

    def state_size(self):
        """Number of stored rows, runs and pending results (memory tests)."""
        cdef Part part
        cdef Stack s
        total = 0
        for bypart in self._parts.values():
            for keyed in bypart.values():
                for part in keyed.values():
                    total += len(part.runs) + len(part.pending) + len(part.ready) + \
                        len(part.held)
                    for s in part.stacks:
                        total += s.n - s.head
        return total

    # -- event loop -------------------------------------------------------

    @cython.boundscheck(False)
    cdef _run_batch(self, i64[:, ::1] vals, u8[:, ::1] kinds, int[::1] tids,
                    i64[::1] ts, i64[::1] seq, i64[::1] part):
        cdef Py_ssize_t e, ne = tids.shape[0]
        cdef int tid, h, slot, col
        cdef _Group g
        cdef PlanRT p
        cdef long m
        cdef PyObject* gp
        cdef Py_ssize_t pf_next = 0
        for e in range(ne):
            if e == pf_next:
                pf_next = min(e + _PF_CHUNK, ne)
                self._prefetch(vals, kinds, tids, part, e, pf_next)
            tid = tids[e]
            self._ts = ts[e]
            self._seq = seq[e]
            self._ts_obj = None
            self._seq_obj = None
            self._partition = part[e]
            self._row_v = <Cell*> &vals[e, 0]
            self._row_k = &kinds[e, 0]
            self._nhit = 0
            # borrowed from the lists (no type test or count per event)
            gp = PyList_GET_ITEM(self._type_groups, tid)
            for h in range(PyList_GET_SIZE(<object> gp)):
                self._offer(<_Group> PyList_GET_ITEM(<object> gp, h), tid)
            gp = PyList_GET_ITEM(self._type_index, tid)
            if PyList_GET_SIZE(<object> gp):
                for col, table in <list> gp:
                    if kinds[e, col] == K_MISSING:
                        continue
                    hit = table.get(key_of(kinds[e, col], self._row_v[col]))
                    if hit is not None:
                        for g in hit:
                            self._offer(g, tid)
            if PyList_GET_SIZE(<object> PyList_GET_ITEM(self._an_specs, tid)):
                self._offer_an(tid)
            # strict contiguity (every event), then partition contiguity
            # (every event of its types): present, reaching no component
            for h in range(self._pco[self._ntypes], self._pco[self._ntypes + 1]):
                slot = self._pcs[h]
                if (not self._use_act or self._act[slot]) and self._masks[slot] == 0:
                    self._hits[self._nhit] = slot
                    self._nhit += 1
                    self._masks[slot] = 1 << MAXC
            for h in range(self._pco[tid], self._pco[tid + 1]):
                slot = self._pcs[h]
                if (not self._use_act or self._act[slot]) and self._masks[slot] == 0:
                    self._hits[self._nhit] = slot
                    self._nhit += 1
                    self._masks[slot] = 1 << MAXC
            for h in range(self._nhit):
                slot = self._hits[h]
                m = self._masks[slot] & ((1 << MAXC) - 1)
                self._masks[slot] = 0
                self._on_plan(<PlanRT> PyList_GET_ITEM(self._plans, slot), m, tid)

    cdef int _prefetch(self, i64[:, ::1] vals, u8[:, ::1] kinds, int[::1] tids, i64[::1] part,
                       Py_ssize_t e0, Py_ssize_t e1) except -1:
        """Group prefetching: the Parts the events [e0, e1) will look up
        (plans keyed by one attribute), and their stacks' rows, brought into
        the cache before those events are processed. A per-car Part is a
        dict's index slot, its entry, its stored key, the Part, its stacks
        tuple, a Stack and its rows, each a cache miss at random once a
        long-running state has turned over; looked up one event at a time
        they wait one after another, here each stage's misses for a whole
        chunk overlap. An int key's lookup is itself split into stages
        (dict_probe.h); other keys are looked up whole.
        Only a hint: nothing is kept, the events look their parts up as
        before. The pointers are borrowed from the dicts, and nothing runs
        in between that could change one (key_of makes ints, no collection)."""
        cdef PyObject* found[_PF_PARTS]
        cdef PyObject* stk[4 * _PF_PARTS]
        cdef caesar_probe probe[_PF_PARTS]
        cdef PyObject* sp
        cdef PyObject* t
        cdef Py_ssize_t e, n = 0, i, c, m = 0, npr = 0, nq = 0
        cdef int h, r, slot, col, tid, last_slot = -1
        cdef i64 last_part = 0, kv = 0, v
        cdef u8 kk = 0, k
        cdef Stack s
        keyed = key = None
        if self._pfo == NULL or self._pfo[self._ntypes] == 0:
            return 0  # no plan keyed by one attribute
        for e in range(e0, e1):
            tid = tids[e]
            for h in range(self._pfo[tid], self._pfo[tid + 1]):
                slot = self._pft[2 * h]
                col = self._pft[2 * h + 1]
                if self._use_act and not self._act[slot]:
                    continue
                k = kinds[e, col]
                if k == K_MISSING or n + npr == _PF_PARTS:
                    continue
                if slot != last_slot or part[e] != last_part:  # mostly one partition
                    keyed = (<dict> self._parts[slot]).get(part[e])
                    last_slot = slot
                    last_part = part[e]
                if keyed is None:
                    continue
                v = vals[e, col]
                if ((k == K_INT or k == K_BOOL)
                        and caesar_probe_begin(&probe[npr], <PyObject*> keyed, v)):
                    npr += 1
                    continue
                if key is None or k != kk or v != kv:
                    kk = k
                    kv = v
                    key = key_of(kk, (<Cell*> &vals[e, 0])[col])
                sp = PyDict_GetItem(keyed, key)
                if sp != NULL:
                    CAESAR_PREFETCH(sp)
                    found[n] = sp
                    n += 1
        for c in range(_PF_STEPS):  # the int keys' lookups, a step each round
            nq = 0
            for i in range(npr):
                r = caesar_probe_step(&probe[i], &sp)
                if r == 1:
                    found[n] = sp
                    n += 1
                elif r == 2:
                    probe[nq] = probe[i]
                    nq += 1
            npr = nq
            if npr == 0:
                break
        for i in range(n):  # the stacks tuples
            if type(<object> found[i]) is not Part:
                found[i] = NULL  # not one of the plan's parts: nothing to follow
                continue
            t = <PyObject*> (<Part> found[i]).stacks
            CAESAR_PREFETCH(&(<PyTupleObject*> t).ob_item[0])
            found[i] = t
        for i in range(n):  # the Stacks (the first 4 of each part)
            t = found[i]
            if t == NULL:
                continue
            for c in range(min(Py_SIZE(<object> t), 4)):
                sp = PyTuple_GET_ITEM(<object> t, c)
                CAESAR_PREFETCH(sp)
                CAESAR_PREFETCH(<char*> sp + 64)  # a Stack spans two lines: its row pointers
                stk[m] = sp
                m += 1
        for i in range(m):  # their first live rows
            s = <Stack> stk[i]
            if s.n > s.head:
                CAESAR_PREFETCH(s.ts + s.head)
                CAESAR_PREFETCH(s.vals + s.head * s.width)
        return 0

    cdef _for_active(self):
        """This call's filter groups and active-node specs: those serving an
        active plan. The matcher calls the engine once per stage with that
        stage's plans active; probing the others' tables per event cost LR's
        SegmentEntry a quarter of its time (LeftSegment's vid-keyed AN table)."""
        cdef u8[::1] act
        if not self._use_act:
            self._type_groups = self._groups_all
            self._an_specs = self._specs_all
            return
        act = self._act
        self._type_groups = [[g for g in gs if any(act[s] for s in (<_Group> g).slots)]
                             for gs in self._groups_all]
        self._an_specs = [[sp for sp in ss if any(act[s] for s in (<_AnSpec> sp).slots)]
                          for ss in self._specs_all]

    cdef object _pobj(self):
        """_partition as an int object, boxed once while it holds (the
        active-node specs, parts and stale entries of an event looked it up
        boxed each); through the engine's table of them (int_in), so the
        dicts keyed by a partition hit on identity."""
        if self._partition_obj is None or self._pobj_of != self._partition:
            self._partition_obj = int_in(self._pc_id, self._pc, _PC - 1, self._partition)
            self._pobj_of = self._partition
        return self._partition_obj

    cdef int _offer_an(self, int tid) except -1:
        # the event's cells through _row_v/_row_k: memoryviews passed by value
        # cost a copy and two reference counts per call
        cdef int j, n, c, slot
        cdef tuple cols
        cdef long m
        cdef PlanRT p
        cdef Env env
        cdef bint passed
        cdef _AnSpec spec
        cdef object keyed
        for spec in self._an_specs[tid]:
            # by partition first: a partition without live instances of the
            # spec's plans costs one int lookup, no key built, no tuple hashed
            if spec.version == self._an_version and spec.at == self._partition:
                keyed = spec.keyed
            else:
                keyed = spec.table.get(self._pobj())
                spec.keyed = keyed
                spec.at = self._partition
                spec.version = self._an_version
            if keyed is None:
                continue
            cols = spec.cols
            n = spec.n
            if n == 0:
                key = 0
            elif n == 1:
                c = cols[0]
                key = key_of(self._row_k[c], self._row_v[c])
                if key is None:
                    continue
            else:
                parts = []
                for j in range(n):
                    c = cols[j]
                    v = key_of(self._row_k[c], self._row_v[c])
                    if v is None:
                        break
                    parts.append(v)
                if len(parts) < n:
                    continue
                key = tuple(parts)
            slots = (<dict> keyed).get(key)
            if not slots:
                continue
            for slot, m in slots.items():
                if self._use_act and not self._act[slot]:
                    continue
                p = self._plans[slot]
                for c in range(p.ncomp):
                    if not (m & (1 << c)):
                        continue
                    if p.filtered[c]:
                        self._extract(p, c, tid)
                        env.vals[c] = p.scratch[c]
                        env.kinds[c] = p.scratch_k[c]
                        env.width[c] = p.width[c]
                        env.row[c] = 0
                        # a loop, not all(genexpr): a generator in a cdef function
                        # makes Cython allocate a closure scope on every call
                        passed = True
                        for f in p.cp.comps[c].filters:
                            if not holds(p, f, &env):
                                passed = False
                                break
                        if not passed:
                            continue
                    if self._masks[slot] == 0:
                        self._hits[self._nhit] = slot
                        self._nhit += 1
                    self._masks[slot] |= 1 << c
        return 0

    cdef int _offer(self, _Group g, int tid) except -1:
        cdef PlanRT rep = g.rep
        cdef int c = g.comp, i, slot
        cdef Env env
        if g.filters:
            self._extract(rep, c, tid)
            env.vals[c] = rep.scratch[c]
            env.kinds[c] = rep.scratch_k[c]
            env.width[c] = rep.width[c]
            env.row[c] = 0
            for f in g.filters:
                if not holds(rep, f, &env):
                    return 0
        for i in range(g.slots.shape[0]):
            slot = g.slots[i]
            if self._use_act and not self._act[slot]:
                continue
            if self._masks[slot] == 0:
                self._hits[self._nhit] = slot
                self._nhit += 1
            self._masks[slot] |= 1 << g.comps[i]
        return 0

    cdef int _extract(self, PlanRT p, int c, int tid) except -1:
        cdef const int* mp = self._mapp[(p.slot * MAXC + c) * self._ntypes + tid]
        cdef int j, w = p.width[c], src
        cdef Cell* dv = p.scratch[c]
        cdef u8* dk = p.scratch_k[c]
        if mp == NULL:
            memcpy(dv, self._row_v, w * sizeof(Cell))
            memcpy(dk, self._row_k, w * sizeof(u8))
            return 0
        for j in range(w):
            src = mp[j]
            if src < 0:
                dv[j].i = 0
                dk[j] = K_MISSING
            else:
                dv[j] = self._row_v[src]
                dk[j] = self._row_k[src]
        return 0

    cdef object _eqkey(self, PlanRT p, int c):
        cdef int j, col
        cdef u8 kd
        cdef Cell v
        if p.neq == 0:
            return 0
        if p.neq == 1:
            col = p.eqcol[c][0]
            if col < 0:
                return None
            kd = p.scratch_k[c][col]
            v = p.scratch[c][col]
            # key_of is a function of the cell: the last key made is reused
            # (LR: SegmentEntry, LeftSegment and TollCharge all key by vid)
            if self._kc_obj is None or kd != self._kc_kind or v.i != self._kc_val:
                self._kc_obj = key_of(kd, v)
                self._kc_kind = kd
                self._kc_val = v.i
            return self._kc_obj
        key = []
        for j in range(p.neq):
            col = p.eqcol[c][j]
            if col < 0:
                return None
            x = key_of(p.scratch_k[c][col], p.scratch[c][col])
            if x is None:
                return None
            key.append(x)
        return tuple(key)

    cdef object _drop_partition(self, PlanRT p, object partition):
        """Plan p's parts dict of `partition` taken out (None if it had
        none), and _get_part's kept dict forgotten with it: the one way a
        partition's dict leaves _parts."""
        self._kdict[p.slot] = None
        return (<dict> self._parts[p.slot]).pop(partition, None)

    cdef Part _find_part(self, PlanRT p, object key):
        """The plan's Part of `key` in the current partition, or None;
        through _get_part's kept dict."""
        cdef dict keyed = <dict> self._kdict[p.slot]
        if keyed is None or self._kpart[p.slot] != self._partition:
            keyed = (<dict> self._parts[p.slot]).get(self._pobj())
            if keyed is None:
                return None
            self._kdict[p.slot] = keyed
            self._kpart[p.slot] = self._partition
        return <Part> keyed.get(key)

    cdef Part _get_part(self, PlanRT p, object key):
        # the plan's parts of the current partition, kept from its last
        # event (consecutive events mostly share a partition: two lookups
        # and an int object saved per event and plan); every place that
        # drops a partition's dict forgets it (_drop_partition)
        cdef dict bypart
        cdef dict keyed = <dict> self._kdict[p.slot]
        if keyed is None or self._kpart[p.slot] != self._partition:
            bypart = self._parts[p.slot]
            keyed = bypart.get(self._pobj())
            if keyed is None:
                keyed = {}
                bypart[self._pobj()] = keyed
            self._kdict[p.slot] = keyed
            self._kpart[p.slot] = self._partition
        part = keyed.get(key)
        if part is None:
            part = new_part(p, (self._pobj(), key))
            keyed[key] = part
        return <Part> part

    cdef _on_plan(self, PlanRT p, long mask, int tname):
        cdef int c, k, first = -1
        cdef Part part = None
        cdef Stack s
        cdef PyObject* sp
        cdef i64 bound
        if p.dead:
            return
        if p.solo and self._columnar and p.leader is None:
            if mask & 1:
                self._solo(p, tname)
            return
        if p.nrun:
            # an equal run: every component has the one layout
            if mask & 1:
                self._extract(p, 0, tname)
                first = 0
        else:
            for c in range(p.ncomp):
                if mask & (1 << c):
                    self._extract(p, c, tname)
                    if first < 0:
                        first = c
        if p.keyless:
            key = 0
        elif first < 0:
            if p.strategy != 3:
                return
            # partition contiguity: an event of the plan's types that no
            # component takes ends the runs of its key, starts nothing
            c = -1
            for q, k in self._pcont[tname]:
                if q is p:
                    c = k
                    break
            if c < 0:
                return
            self._extract(p, c, tname)
            key = self._eqkey(p, c)
            if key is None:
                return
            part = self._find_part(p, key)
            if part is None:
                return  # no run of that key lives
        else:
            key = self._eqkey(p, first)
            if key is None:
                return
            if p.needs_part and not (mask & p.startmask):
                part = self._find_part(p, key)
                if part is None:
                    return  # no run of that key lives (_mark_fast_paths)
        if part is None:
            part = self._get_part(p, key)
        part.touched = self._ts
        if p.nrun:
            self._equal_run_step(p, part, first >= 0)
            return
        if p.leader is not None:
            self._relink(p, part, self._partition, key)
        # results waiting for an end negation whose window is over can no
        # longer be killed; move them aside so their rows may be pruned
        if has_items(part.pending):
            keep = []
            for item in part.pending:
                if item[0] <= self._ts:
                    if not part.ready:
                        part.ready = []
                    part.ready.append(item[:2])
                elif not (mask and self._kills(p, part, item, mask)):
                    keep.append(item)
            part.pending = keep or ()
        if p.within >= 0:
            bound = self._ts - p.within
            if has_items(part.runs):  # before pruning: runs point into the stacks
                self._expire_runs(p, part, bound)
            for c in range(p.ncomp):
                sp = PyTuple_GET_ITEM(part.stacks, c)  # borrowed (_run_first_ts)
                if (<Stack> sp).n > (<Stack> sp).head and \
                        (<Stack> sp).ts[(<Stack> sp).head] <= bound:
                    (<Stack> sp).prune(bound)
        # negated events: kept for start/middle negation probes; a middle
        # one only matters while an instance of the positive before it exists
        for c in range(p.ncomp):
            if not (p.negated[c] and (mask & (1 << c))):
                continue
            if p.strategy == 0 and p.prevpos[c] >= 0 and not p.has_optional:
                if p.nextpos[c] < 0:
                    if not part.pending:
                        self._an_register(p, c, part.key, False)  # stale entry
                    continue
                s = part.stacks[p.pos[p.prevpos[c]]]
                if s.n == s.head:
                    self._an_register(p, c, part.key, False)  # stale entry
                    continue
                if p.neggate[c] >= 0 and not self._may_block(p, part, c):
                    continue
            if p.nextpos[c] >= 0:
                if p.killneg[c] and self._waiting_lo(p, part, c) >= self._ts:
                    continue  # no run waits at c, so this event can block nothing
                s = owned(part, c)
                s.push(self._ts, self._seq, p.scratch[c], p.scratch_k[c])
        if p.strategy == 0:
            self._any(p, part, mask, key)
        else:
            self._runs_step(p, part, mask)
            if has_items(part.held):
                self._release(p, part)
            # contiguity ends most runs at the next event: without a trim the
            # rows of dead runs stayed for the whole window (LR StoppedCar:
            # a moving car's last three reports in two stacks)
            if p.nkill or (p.strategy >= 2 and p.skip == 0):
                self._trim(p, part, key)

    cdef int _equal_run_step(self, PlanRT p, Part part, bint took) except -1:
        """An equal run's step (compile.equal_run): its part keeps the key's
        latest stretch of events with equal run columns, at most ncomp - 1 of
        them within the window, in one stack serving every component. The
        event (`took`: it reached the plan; else, under partition
        contiguity, it only ends the stretch) continues the stretch when it
        is later than its last event and equal to it, else starts a new
        one; ncomp events in the stretch are a match, the last ncomp. The
        general path's runs are exactly the stretch's suffixes: it kept a
        run list per event and the rows per component (LR StoppedCar: a
        quarter of the deriver's time)."""
        cdef Stack s = self._equal_run_stack(p, part)
        cdef int c, n = p.ncomp
        cdef i64 last
        cdef Cell* cur = p.scratch[0]
        cdef u8* ck = p.scratch_k[0]
        cdef Env env
        if s.n > s.head:
            last = s.n - 1
            # (a run takes a later event only)
            if took and self._ts > s.ts[last] and _equal_to_row(p, s, last, cur, ck):
                if p.within >= 0:
                    s.prune(self._ts - p.within)
            else:
                s.prune(s.ts[last])
        if not took:
            return 0
        s.push(self._ts, self._seq, cur, ck)
        if s.n - s.head < n:
            return 0
        for c in range(n):
            env.vals[c] = s.vals
            env.kinds[c] = s.kinds
            env.width[c] = s.width
            env.row[c] = s.n - n + c
            env.klen[c] = 1
            env.klist[c] = NULL
        self._finish(p, part, &env)
        s.prune(s.ts[s.n - n])  # the next match ends with a later event
        return 0

    cdef Stack _equal_run_stack(self, PlanRT p, Part part):
        """The one stack of an equal run's part, as every component's: made
        on the part's first event. A restored part has a stack per
        component: copies of it, or, written by the general path (an earlier
        version), per component with the runs, whose longest one is the
        stretch (the first component's stack may hold more: the trim keeps
        rows by time, so an event tied with the stretch's first stays)."""
        cdef Stack s = <Stack> PyTuple_GET_ITEM(part.stacks, 0), src
        cdef int k
        cdef i64 r
        if PyTuple_GET_ITEM(part.stacks, 1) == <PyObject*> s and not s.shared:
            return s
        if has_items(part.runs):
            longest = max(part.runs, key=len)
            s = new_stack(p.width[0])
            for k in range(len(longest)):
                src = <Stack> part.stacks[p.pos[k]]
                r = <i64> longest[k][len(longest[k]) - 1] - src.base
                s.push(src.ts[r], src.seq[r], src.vals + r * src.width,
                       src.kinds + r * src.width)
            part.runs = ()
        elif s.shared:
            s = new_stack(p.width[0])
        part.stacks = (s,) * p.ncomp
        return s

    cdef int _solo(self, PlanRT p, int tname) except -1:
        """What _any, _construct, _dfs and _finish do for a solo plan
        (_mark_fast_paths): the event passed the component's filters, so it
        is a match; written into the plan's MatchSink as _sink_match does
        (from, to and seq: the event's own)."""
        cdef Env env
        cdef MatchSink sink
        cdef Py_ssize_t r, at
        cdef int j
        self._extract(p, 0, tname)
        env.vals[0] = p.scratch[0]
        env.kinds[0] = p.scratch_k[0]
        env.width[0] = p.width[0]
        env.row[0] = 0
        env.klen[0] = 0
        env.klist[0] = NULL
        sink = <MatchSink> self._sinks[p.slot]
        r = sink.row(self._emitted, self._partition, self._ts, self._ts)
        at = r * sink.nf
        self._emitted += 1
        for j in range(len(p.outputs)):
            sink.kinds[at] = _output(p, j, &env, &sink.vals[at])
            at += 1
        sink.reserve_seqs(1)
        sink.seqs[sink.ns] = self._seq
        sink.ns += 1
        sink.soff[r + 1] = sink.ns
        return 0

    cdef bint _may_block(self, PlanRT p, Part part, int c) except -1:
        """Does the current event of middle negation c pass its checks with
        an instance of the component they read (compile.py's _gate) that is
        strictly earlier? If not, it can block no match: every instance to
        come is at or after it."""
        cdef Env env
        cdef int j = p.neggate[c]
        cdef Stack s = part.stacks[j]
        cdef i64 i
        env.vals[c] = p.scratch[c]
        env.kinds[c] = p.scratch_k[c]
        env.width[c] = p.width[c]
        env.row[c] = 0
        env.vals[j] = s.vals
        env.kinds[j] = s.kinds
        env.width[j] = s.width
        for i in range(s.head, s.n):
            if s.ts[i] >= self._ts:
                break
            env.row[j] = i
            if negchecks(p, c, &env):
                return True
        return False

    # -- skip till any match: AIS + DFS --------------------------------------

    def _relink_an(self):
        """Register every non-empty stack in the active-node index (after
        the index is rebuilt or state is restored)."""
        cdef PlanRT p
        cdef Part part
        cdef Stack s
        cdef int k
        for p in self._plans:
            if p.strategy != 0 or p.keyless:
                continue
            for partition, keyed in self._parts[p.slot].items():
                for key, part in keyed.items():
                    for k in range(p.npos - 1):
                        s = part.stacks[p.pos[k]]
                        if s.n > s.head:
                            self._an_register_after(p, k, (partition, key))
                    if part.pending:
                        self._an_register_end(p, (partition, key))

    cdef _an_forget(self, PlanRT p, object partition, object key):
        cdef int c
        if p.strategy == 0:
            for c in range(p.ncomp):
                if p.rank[c] > 0 or (p.negated[c] and p.prevpos[c] >= 0):
                    self._an_register(p, c, (partition, key), False)

    cdef _an_register_after(self, PlanRT p, int k, object pkey):
        """Positive position k got its first instance: the positive
        components it gates (the next one, and the ones after optional
        components up to the next mandatory one) and the middle negations
        right after k become live."""
        cdef int c, j
        for j in range(k + 1, p.npos):
            if p.gate[j] == k:
                self._an_register(p, p.pos[j], pkey, True)
        for c in range(p.ncomp):
            if p.negated[c] and p.prevpos[c] == k and p.nextpos[c] >= 0:
                self._an_register(p, c, pkey, True)

    cdef _an_register_end(self, PlanRT p, object pkey):
        cdef int c
        for c in range(p.ncomp):
            if p.negated[c] and p.nextpos[c] < 0:
                self._an_register(p, c, pkey, True)

    cdef _an_register(self, PlanRT p, int c, object pkey, bint on):
        """Mark (on) or unmark component c of plan p live for `pkey`
        (partition, equivalence key) in its active-node tables, which are
        {partition: {key: {slot: component mask}}}."""
        cdef dict table, keyed, slots
        tables = self._an_tables.get((p.slot, c))
        if not tables:
            return
        partition, key = pkey
        for table in tables:
            keyed = table.get(partition)
            slots = keyed.get(key) if keyed is not None else None
            if on:
                if slots is None:
                    if keyed is None:
                        keyed = table[partition] = {}
                        self._an_version += 1  # _AnSpec's kept lookups
                    keyed[key] = {p.slot: 1 << c}
                else:
                    slots[p.slot] = slots.get(p.slot, 0) | (1 << c)
            elif slots is not None and p.slot in slots:
                m = slots[p.slot] & ~(1 << c)
                if m:
                    slots[p.slot] = m
                else:
                    del slots[p.slot]
                    if not slots:
                        del keyed[key]
                        if not keyed:
                            del table[partition]
                            self._an_version += 1

    cdef _any(self, PlanRT p, Part part, long mask, object key):
        cdef int k, c
        cdef Stack s, prev
        cdef i64 row
        for k in range(p.npos - 1, -1, -1):
            c = p.pos[k]
            if not (mask & (1 << c)):
                continue
            if k > 0:
                # the nearest earlier mandatory component must hold an
                # earlier event (optional ones in between may bind nothing)
                prev = <Stack> PyTuple_GET_ITEM(part.stacks, p.pos[p.gate[k]])
                if prev.n == prev.head:
                    self._an_register(p, c, (self._pobj(), key), False)  # stale entry
                    continue
                if prev.ts[prev.head] >= self._ts:
                    continue  # no earlier event can precede it: not worth keeping
            s = owned(part, c)
            if k < p.npos - 1:
                if s.n == s.head:
                    self._an_register_after(p, k, part.key)
                s.push(self._ts, self._seq, p.scratch[c], p.scratch_k[c])
                continue
            row = s.push(self._ts, self._seq, p.scratch[c], p.scratch_k[c])
            try:
                self._construct(p, part, row)
            finally:  # the plan's one last stack (last_stack) stays empty even then
                if not p.kleene[c] and not p.has_end_neg:
                    s.pop()

    cdef _construct(self, PlanRT p, Part part, i64 last_row):
        cdef Env env
        cdef int c, k
        cdef PyObject* sp
        cdef i64* bufs[MAXC]
        self._plan = p
        self._part = part
        self._last_local = last_row
        self._lo = self._ts - p.within if p.within >= 0 else NO_TS
        for c in range(p.ncomp):
            bufs[c] = NULL
        try:
            for c in range(p.ncomp):
                sp = PyTuple_GET_ITEM(part.stacks, c)  # borrowed (_run_first_ts)
                env.vals[c] = (<Stack> sp).vals
                env.kinds[c] = (<Stack> sp).kinds
                env.width[c] = (<Stack> sp).width
                env.row[c] = -1  # not bound yet: reads as missing
                env.klen[c] = 0
                env.klist[c] = NULL
                if p.kleene[c]:
                    bufs[c] = <i64*> malloc(((<Stack> sp).n - (<Stack> sp).head + 2)
                                            * sizeof(i64))
                    env.klist[c] = bufs[c]
            if p.keyless and p.neq > 0 and not self._eq_last(p, part, p.pos[p.npos - 1],
                                                              last_row):
                return  # the last event has no (complete) equivalence key
            self._dfs(p, part, &env, 0, NO_TS)
        finally:
            for c in range(p.ncomp):
                if bufs[c] != NULL:
                    free(bufs[c])

    cdef bint _eq_last(self, PlanRT p, Part part, int c, i64 row) except -1:
        """Keyless plans check [attr] while matching: a row of component c
        against the event that triggered construction."""
        cdef int cl = p.pos[p.npos - 1]
        cdef Stack s = part.stacks[c], sl = part.stacks[cl]
        return eq_vals(s.vals + row * s.width, s.kinds + row * s.width,
                       sl.vals + self._last_local * sl.width,
                       sl.kinds + self._last_local * sl.width, p, c, cl)

    cdef int _dfs(self, PlanRT p, Part part, Env* env, int k, i64 after) except -1:
        cdef int c = p.pos[k]
        # borrowed (_run_first_ts): nothing replaces a part's stacks while
        # its matches are made
        cdef Stack s = <Stack> PyTuple_GET_ITEM(part.stacks, c)
        cdef i64 i, start, lo = after if after > self._lo else self._lo
        cdef bint last = k == p.npos - 1
        cdef bint eq = p.keyless and p.neq > 0
        if p.kleene[c]:
            return self._kleene(p, part, env, k, 0, lo)
        if last:
            env.row[c] = self._last_local
            if checks(p, k, env):
                self._finish(p, part, env)
            return 0
        start = s.first_gt(lo)
        for i in range(start, s.n):
            if s.ts[i] >= self._ts:
                break
            if eq and not self._eq_last(p, part, c, i):
                continue
            env.row[c] = i
            if checks(p, k, env):
                self._dfs(p, part, env, k + 1, s.ts[i])
        return 0

    cdef int _kleene(self, PlanRT p, Part part, Env* env, int k, int m, i64 after) except -1:
        """Kleene component k holds m elements so far; choose the next one
        after `after`, then either close the component (once it holds at
        least its minimum) or keep iterating (below its maximum). An optional
        component may also bind nothing (it is never the last one)."""
        cdef int c = p.pos[k]
        cdef Stack s = part.stacks[c]
        cdef bint last = k == p.npos - 1
        cdef bint eq = p.keyless and p.neq > 0
        cdef int minc = p.minc[c], maxc = p.maxc[c]
        cdef i64 i, start
        if m == 0 and minc == 0:
            env.klen[c] = 0
            env.row[c] = -1
            if checks(p, k, env):
                self._dfs(p, part, env, k + 1, after)
        start = s.first_gt(after)
        for i in range(start, s.n):
            if s.ts[i] > self._ts:
                break
            if s.ts[i] == self._ts and not (last and i == self._last_local):
                continue
            if eq and not self._eq_last(p, part, c, i):
                continue
            env.klen[c] = m
            env.row[c] = i
            if p.iterf[c] >= 0 and not holds(p, p.iterf[c], env):
                continue
            env.klist[c][m] = i
            env.klen[c] = m + 1
            env.row[c] = i
            if last:
                if i == self._last_local:
                    if m + 1 >= minc and checks(p, k, env):
                        self._finish(p, part, env)
                    break
            elif m + 1 >= minc and checks(p, k, env):
                self._dfs(p, part, env, k + 1, s.ts[i])
            if maxc == 0 or m + 1 < maxc:
                self._kleene(p, part, env, k, m + 1, s.ts[i])
        return 0

    # -- completion, negation, output -----------------------------------------

    cdef int _finish(self, PlanRT p, Part part, Env* env) except -1:
        cdef int c, j, kprev, knext
        cdef Stack s, ns
        cdef i64 lo, hi, first_ts, last_ts, i
        cdef int cf = p.pos[0], cl = p.pos[p.npos - 1]
        s = <Stack> PyTuple_GET_ITEM(part.stacks, cf)
        first_ts = s.ts[env.klist[cf][0]] if p.kleene[cf] else s.ts[env.row[cf]]
        s = <Stack> PyTuple_GET_ITEM(part.stacks, cl)
        last_ts = s.ts[env.row[cl]]
        for c in range(p.ncomp):
            if not p.negated[c] or p.nextpos[c] < 0:
                continue
            # neighbours: the nearest positive components that bound events
            # (an optional one that bound nothing is passed over)
            kprev = p.prevpos[c]
            while kprev >= 0 and p.kleene[p.pos[kprev]] and env.klen[p.pos[kprev]] == 0:
                kprev -= 1
            knext = p.nextpos[c]
            while p.kleene[p.pos[knext]] and env.klen[p.pos[knext]] == 0:
                knext += 1  # the last positive component is never optional
            if kprev >= 0:
                j = p.pos[kprev]
                lo = (<Stack> PyTuple_GET_ITEM(part.stacks, j)).ts[env.row[j]]
            else:
                lo = last_ts - p.within
            j = p.pos[knext]
            s = <Stack> PyTuple_GET_ITEM(part.stacks, j)
            hi = s.ts[env.klist[j][0]] if p.kleene[j] else s.ts[env.row[j]]
            ns = <Stack> PyTuple_GET_ITEM(part.stacks, c)
            env.vals[c] = ns.vals
            env.kinds[c] = ns.kinds
            env.width[c] = ns.width
            for i in range(ns.first_gt(lo), ns.n):
                if ns.ts[i] >= hi:
                    break
                env.row[c] = i
                if p.keyless and p.eq_neg and not self._neg_equiv(
                        p, part, env, c, ns.vals + i * ns.width, ns.kinds + i * ns.width):
                    continue
                if negchecks(p, c, env):
                    return 0
        if self._columnar and not (p.has_end_neg or p.skip):
            self._sink_match(p, part, env, first_ts, last_ts)
            return 0
        derived = self._derive(p, part, env, first_ts, last_ts)
        if p.has_end_neg:
            self._part_pending(part, p, env, first_ts + p.within, derived)
        elif p.skip:
            self._hold(p, part, env, derived)
        else:
            self._out.append(derived)
        return 0

    cdef _put(self, PlanRT p, object ev):
        """A match made as a DerivedEvent (end negation, after-match skip,
        timeout) into this call's output."""
        cdef MatchSink sink
        if not self._columnar:
            self._out.append(ev)
            return
        key = (p.plan_id, ev.event_type)
        sink = self._sink_of.get(key)
        if sink is None:
            sink = self._sink_of[key] = MatchSink(p.plan_id, ev.event_type,
                                                      tuple(ev.fields))
        sink.add_event(ev, self._emitted)
        self._emitted += 1

    cdef int _sink_match(self, PlanRT p, Part part, Env* env, i64 first_ts,
                         i64 last_ts) except -1:
        """The match as a row of its plan's MatchSink: what _derive puts in
        a DerivedEvent, written into C arrays."""
        cdef MatchSink sink = <MatchSink> self._sinks[p.slot]
        cdef Py_ssize_t r = sink.row(self._emitted, self._partition, first_ts, last_ts)
        cdef Py_ssize_t at = r * sink.nf
        cdef int k, c, j, n = 0
        cdef PyObject* sp
        self._emitted += 1
        for j in range(len(p.outputs)):
            sink.kinds[at] = _output(p, j, env, &sink.vals[at])
            at += 1
        n = _match_len(p, env)
        sink.reserve_seqs(n)
        for k in range(p.npos):
            c = p.pos[k]
            sp = PyTuple_GET_ITEM(part.stacks, c)  # borrowed (_run_first_ts)
            if p.kleene[c]:
                for j in range(env.klen[c]):
                    sink.seqs[sink.ns] = (<Stack> sp).seq[env.klist[c][j]]
                    sink.ns += 1
            else:
                sink.seqs[sink.ns] = (<Stack> sp).seq[env.row[c]]
                sink.ns += 1
        sink.soff[r + 1] = sink.ns
        return 0

    cdef _clear_sinks(self):
        # as `_out = []` does for process/advance: a call that raised leaves
        # nothing behind for the next one
        cdef MatchSink sink
        self._emitted = 0
        for sink in self._sink_of.values():
            sink.clear()

    cdef _take(self):
        """This call's matches as a MatchBatch; the sinks start empty."""
        cdef MatchSink sink
        cols = []
        for sink in self._sink_of.values():
            if sink.n:
                cols.append(sink.take(self._pool))
        return MatchBatch(cols)

    cdef _hold(self, PlanRT p, Part part, Env* env, derived):
        """After-match skip: keep the complete match until no run that
        started earlier is left (_release), with the seq its strategy
        prunes partial matches up to."""
        cdef int c, n
        cdef Stack s
        seqs = derived.event_seqs
        prune = None
        if p.skip == 1:  # to next event
            prune = seqs[0]
        elif p.skip == 2:  # past last event
            prune = seqs[len(seqs) - 1]
        elif p.skip_pos >= 0:  # to first / last event of a variable
            c = p.pos[p.skip_pos]
            s = part.stacks[c]
            n = env.klen[c] if p.kleene[c] else 1
            if n > 0:
                if not p.kleene[c]:
                    prune = s.seq[env.row[c]]
                elif p.skip == 3:
                    prune = s.seq[env.klist[c][0]]
                else:
                    prune = s.seq[env.klist[c][n - 1]]
        if not part.held:
            part.held = []
        part.held.append(((seqs[0], seqs), derived, prune))

    cdef _release(self, PlanRT p, Part part):
        """Emit held matches in the order of their first event while no run
        that started earlier is left; each prunes runs and held matches
        that started at or before (to first / to last: before) its seq."""
        cdef Stack sf = part.stacks[p.pos[0]]
        held = part.held
        held.sort(key=_held_order)
        strict_before = p.skip >= 3
        while held:
            item = held[0]
            if part.runs and min([sf.seq[<i64> r[0][0] - sf.base] for r in part.runs]) \
                    < item[0][0]:
                break
            held.pop(0)
            self._put(p, item[1])
            bound = item[2]
            if bound is None:
                continue
            if strict_before:
                part.runs = [r for r in part.runs if sf.seq[<i64> r[0][0] - sf.base] >= bound] \
                    or ()
                held[:] = [h for h in held if h[0][0] >= bound]
            else:
                part.runs = [r for r in part.runs if sf.seq[<i64> r[0][0] - sf.base] > bound] \
                    or ()
                held[:] = [h for h in held if h[0][0] > bound]
        if not held:
            part.held = ()

    cdef bint _neg_equiv(self, PlanRT p, Part part, Env* env, int c, Cell* v, u8* k) except -1:
        cdef int cf = p.pos[0]
        cdef Stack s = part.stacks[cf]
        cdef i64 r = env.klist[cf][0] if p.kleene[cf] else env.row[cf]
        if p.neq == 0:
            return True
        return eq_vals(v, k, s.vals + r * s.width, s.kinds + r * s.width, p, c, cf)

    cdef _part_pending(self, Part part, PlanRT p, Env* env, i64 deadline, derived):
        cdef int k, c, j
        cdef Stack s
        rows = []
        for k in range(p.npos):
            c = p.pos[k]
            s = part.stacks[c]
            if p.kleene[c]:
                rows.append([s.base + env.klist[c][j] for j in range(env.klen[c])])
            else:
                rows.append([s.base + env.row[c]])
        if not part.pending and p.strategy == 0:
            self._an_register_end(p, part.key)
        if not part.pending:
            part.pending = []
        part.pending.append([deadline, derived, rows])
        self._waiting[p.slot][part] = None

    cdef object _derive(self, PlanRT p, Part part, Env* env, i64 first_ts, i64 last_ts):
        """The match as a DerivedEvent, built without the dataclass'
        Python-level __init__ and kept out of the cyclic GC (it holds only
        strings, numbers and an untracked dict and tuple, so it can never be
        part of a cycle). Dense matches made this the engine's main cost:
        every match allocated a tracked object that survived the batch, and
        the collections that followed walked them all (bench/peers)."""
        cdef int k, c, j, n = 0
        cdef Stack s
        cdef Cell v
        cdef u8 kd
        fields = {}
        for name, prog in p.outputs:
            kd = eval_prog(p, prog, env, &v)
            fields[name] = _int_of(v.i) if kd == K_INT else pyvalue(kd, v, self._pool)
        n = _match_len(p, env)
        seqs = PyTuple_New(n)
        n = 0
        for k in range(p.npos):
            c = p.pos[k]
            s = part.stacks[c]
            if p.kleene[c]:
                for j in range(env.klen[c]):
                    _tuple_put(seqs, n, self._seq_int(s.seq[env.klist[c][j]]))
                    n += 1
            else:
                _tuple_put(seqs, n, self._seq_int(s.seq[env.row[c]]))
                n += 1
        PyObject_GC_UnTrack(seqs)
        if last_ts == self._ts:
            if self._ts_obj is None:
                self._ts_obj = last_ts
            end = self._ts_obj
        else:
            end = last_ts
        ev = _new_derived()
        if _DIRECT:
            _slot_put(ev, 0, p.plan_id)
            _slot_put(ev, 1, p.output_type)
            _slot_put(ev, 2, self._partition)
            _slot_put(ev, 3, _int_of(first_ts))
            _slot_put(ev, 4, end)
            _slot_put(ev, 5, fields)
            _slot_put(ev, 6, seqs)
        else:
            PyObject_GenericSetAttr(ev, "plan_id", p.plan_id)
            PyObject_GenericSetAttr(ev, "event_type", p.output_type)
            PyObject_GenericSetAttr(ev, "partition", self._partition)
            PyObject_GenericSetAttr(ev, "start_ts", first_ts)
            PyObject_GenericSetAttr(ev, "end_ts", end)
            PyObject_GenericSetAttr(ev, "fields", fields)
            PyObject_GenericSetAttr(ev, "event_seqs", seqs)
        PyObject_GC_UnTrack(ev)
        return ev

    cdef inline object _seq_int(self, i64 seq):
        if seq != self._seq:
            return _int_of(seq)
        if self._seq_obj is None:
            self._seq_obj = seq
        return self._seq_obj

    cdef bint _kills(self, PlanRT p, Part part, list item, long mask) except -1:
        """Does the current event (a candidate of an end negation) kill this
        pending result?"""
        cdef Env env
        cdef int c, k, j, n
        cdef Stack s
        cdef i64 deadline = item[0], lo
        cdef bint killed = False
        cdef i64* bufs[MAXC]
        rows = item[2]
        for c in range(MAXC):
            bufs[c] = NULL
        try:
            for k in range(p.npos):
                c = p.pos[k]
                s = part.stacks[c]
                env.vals[c] = s.vals
                env.kinds[c] = s.kinds
                env.width[c] = s.width
                lst = rows[k]
                n = len(lst)
                env.row[c] = lst[n - 1] - s.base if n > 0 else -1
                env.klen[c] = n
                if p.kleene[c]:
                    bufs[c] = <i64*> malloc((n + 1) * sizeof(i64))
                    for j in range(n):
                        bufs[c][j] = lst[j] - s.base
                    env.klist[c] = bufs[c]
            c = p.pos[p.npos - 1]
            s = part.stacks[c]
            lo = s.ts[env.row[c]]
            if not (lo < self._ts < deadline):
                return False
            for c in range(p.ncomp):
                if not p.negated[c] or p.nextpos[c] >= 0 or not (mask & (1 << c)):
                    continue
                env.vals[c] = p.scratch[c]
                env.kinds[c] = p.scratch_k[c]
                env.width[c] = p.width[c]
                env.row[c] = 0
                if p.keyless and p.eq_neg and not self._neg_equiv(p, part, &env, c, p.scratch[c],
                                                                  p.scratch_k[c]):
                    continue
                if negchecks(p, c, &env):
                    killed = True
                    break
        finally:
            for c in range(MAXC):
                free(bufs[c])
        return killed

    # -- skip till next match / strict contiguity: runs ------------------------

    cdef i64 _run_first_ts(self, Part part, PlanRT p, list run):
        # borrowed: part.stacks holds the stack (no type test, no reference count)
        cdef PyObject* sp = PyTuple_GET_ITEM(part.stacks, p.pos[0])
        cdef list first = <list> run[0]
        return (<Stack> sp).ts[<i64> first[0] - (<Stack> sp).base]

    cdef i64 _row_for(self, PlanRT p, Part part, int c, i64* pushed) except -2:
        """Absolute row id of the current event in component c's stack
        (pushed once per event, on demand)."""
        cdef Stack s
        cdef i64 r = pushed[c]
        if r < 0:
            s = owned(part, c)
            r = s.push(self._ts, self._seq, p.scratch[c], p.scratch_k[c]) + s.base
            pushed[c] = r
        return r

    cdef int _load_run(self, PlanRT p, Part part, list run, Env* env, i64** bufs) except -1:
        cdef int k, c, j, n
        cdef Stack s
        cdef tuple stacks = part.stacks
        cdef PyObject* sp
        for k in range(p.ncomp):
            # the stack borrowed from the tuple: no type test or reference
            # count per component (a run step loads the run per event)
            sp = PyTuple_GET_ITEM(stacks, k)
            env.vals[k] = (<Stack> sp).vals
            env.kinds[k] = (<Stack> sp).kinds
            env.width[k] = (<Stack> sp).width
            env.row[k] = -1  # not bound (yet): reads as missing
            env.klen[k] = 0
            env.klist[k] = NULL
        for k in range(len(run)):
            c = p.pos[k]
            s = <Stack> PyTuple_GET_ITEM(part.stacks, c)
            lst = run[k]
            n = len(lst)
            env.row[c] = <i64> lst[n - 1] - s.base if n > 0 else -1
            env.klen[c] = n
            if p.kleene[c]:
                free(bufs[c])
                bufs[c] = <i64*> malloc((n + 2) * sizeof(i64))
                for j in range(n):
                    bufs[c][j] = <i64> lst[j] - s.base
                env.klist[c] = bufs[c]
        return 0

    cdef bint _run_ok(self, PlanRT p, Part part, list run, int c, Env* env,
                      i64 local_row) except -1:
        """Window and (keyless plans) equivalence for adding the current
        event, at local_row of component c's values in env (its stack, or
        the extracted event: _advance_run), to `run`."""
        cdef int cf = p.pos[0]
        cdef Stack sf = <Stack> PyTuple_GET_ITEM(part.stacks, cf)
        cdef Cell* cv = env.vals[c] + local_row * env.width[c]
        cdef u8* ck = env.kinds[c] + local_row * env.width[c]
        cdef i64 fr
        if p.within >= 0 and run and self._ts - self._run_first_ts(part, p, run) >= p.within:
            return False
        if p.keyless and p.neq > 0:
            if run:
                fr = <i64> run[0][0] - sf.base
                return eq_vals(cv, ck, sf.vals + fr * sf.width, sf.kinds + fr * sf.width,
                               p, c, cf)
            return eq_vals(cv, ck, cv, ck, p, c, c)
        return True

    cdef bint _can_extend(self, PlanRT p, Part part, list run, Env* env,
                          i64 local_row) except -1:
        """One more element for the run's last (Kleene) component: the event
        is at local_row of its stack; env holds the run."""
        cdef int k = len(run) - 1
        cdef int c = p.pos[k]
        if not self._run_ok(p, part, run, c, env, local_row):
            return False
        env.klen[c] = len(run[k])
        env.row[c] = local_row
        return p.iterf[c] < 0 or holds(p, p.iterf[c], env)

    cdef bint _can_bind(self, PlanRT p, Part part, list run, int j, Env* env,
                        i64 local_row) except -1:
        """Bind the current event (at local_row of the stack of positive
        position j) after the run's components, the optional ones between
        (positions len(run) .. j-1) bound to nothing; env holds the run.
        Checks the levels this closes: the run's last component if it is a
        Kleene one, the skipped ones, and j itself unless it is a Kleene one
        (that closes later)."""
        cdef int m = len(run), t
        cdef int c = p.pos[j]
        if not self._run_ok(p, part, run, c, env, local_row):
            return False
        for t in range(m, j):
            env.row[p.pos[t]] = -1
            env.klen[p.pos[t]] = 0
        if p.kleene[c]:
            env.klen[c] = 0
            env.row[c] = local_row
            if p.iterf[c] >= 0 and not holds(p, p.iterf[c], env):
                return False
        if m > 0 and p.kleene[p.pos[m - 1]] and not checks(p, m - 1, env):
            return False
        for t in range(m, j):
            if not checks(p, t, env):
                return False
        if not p.kleene[c]:
            env.row[c] = local_row
            if not checks(p, j, env):
                return False
        return True

    cdef object _advance_run(self, PlanRT p, Part part, list run, long mask, Env* env,
                             i64** bufs, i64* pushed):
        """The run with the current event bound to the next component, or
        to a later one when every component before it is optional (the
        earliest that takes it); None if none does."""
        cdef int m = len(run), j, cj
        cdef i64 r = -1
        cdef bint bound
        if len(run[m - 1]) < p.minc[p.pos[m - 1]]:
            return None
        for j in range(m, p.npos):
            cj = p.pos[j]
            if mask & (1 << cj):
                if p.kleene[cj]:
                    r = self._row_for(p, part, cj, pushed)
                    self._load_run(p, part, run, env, bufs)
                    bound = self._can_bind(p, part, run, j, env,
                                           r - (<Stack> PyTuple_GET_ITEM(part.stacks, cj)).base)
                else:
                    # checked on the extracted event, pushed only if it binds:
                    # under contiguity most events end the run they meet
                    # (LR StoppedCar: a moving car), and the row pushed for
                    # the check was pruned right after
                    self._load_run(p, part, run, env, bufs)
                    env.vals[cj] = p.scratch[cj]
                    env.kinds[cj] = p.scratch_k[cj]
                    env.width[cj] = p.width[cj]
                    bound = self._can_bind(p, part, run, j, env, 0)
                    if bound:
                        r = self._row_for(p, part, cj, pushed)
                if bound:
                    return [list(x) for x in run] + [[] for _ in range(m, j)] + [[r]]
            if p.minc[cj] > 0:
                break  # a mandatory component cannot be passed over
        return None

    cdef object _extend_run(self, PlanRT p, Part part, list run, long mask, Env* env,
                            i64** bufs, i64* pushed):
        """The run with the current event as one more element of its last
        (Kleene) component, below its maximum; None if it cannot take it."""
        cdef int m = len(run)
        cdef int c = p.pos[m - 1]
        cdef i64 r
        if not p.kleene[c] or not (mask & (1 << c)) or \
                (p.maxc[c] > 0 and len(run[m - 1]) >= p.maxc[c]):
            return None
        r = self._row_for(p, part, c, pushed)
        self._load_run(p, part, run, env, bufs)
        if self._can_extend(p, part, run, env,
                            r - (<Stack> PyTuple_GET_ITEM(part.stacks, c)).base):
            return [list(x) for x in run[:m - 1]] + [run[m - 1] + [r]]
        return None

    cdef bint _extendable(self, PlanRT p, list run):
        """Can a later event still change this run?"""
        cdef int cl = p.pos[p.npos - 1]
        return len(run) < p.npos or (
            p.kleene[cl] and (p.maxc[cl] == 0 or len(run[p.npos - 1]) < p.maxc[cl]))

    cdef _runs_step(self, PlanRT p, Part part, long mask):
        cdef bint strict = p.strategy >= 2  # contiguity: a run that takes nothing dies
        cdef int n = p.npos, m, c
        cdef Env env
        cdef i64* bufs[MAXC]
        cdef Stack s
        cdef i64 last_ts
        # the current event's row in each component's stack, pushed on demand
        # (_row_for; -1: not yet): a C array, not a list per event
        cdef i64 pushed[MAXC]
        cdef list kept = []
        cdef list run
        cdef list dead = None  # a one-event run that ended here: _advance_first reuses it
        for c in range(p.ncomp):
            bufs[c] = NULL
            pushed[c] = -1
        self._part = part
        try:
            for run in part.runs:
                if p.nkill and self._killed(p, part, run, &env, bufs):
                    continue  # no completion can pass its middle negation
                m = len(run)
                c = p.pos[m - 1]
                s = <Stack> PyTuple_GET_ITEM(part.stacks, c)
                last_ts = s.ts[<i64> run[m - 1][len(run[m - 1]) - 1] - s.base]
                new = None
                if self._ts > last_ts:
                    # reluctant (default): bind a later component if it can;
                    # greedy: extend the Kleene component if it can
                    if p.greedy[c]:
                        new = self._extend_run(p, part, run, mask, &env, bufs, &pushed[0])
                        if new is None:
                            new = self._advance_run(p, part, run, mask, &env, bufs, &pushed[0])
                    else:
                        new = self._advance_run(p, part, run, mask, &env, bufs, &pushed[0])
                        if new is None:
                            new = self._extend_run(p, part, run, mask, &env, bufs, &pushed[0])
                if new is None:
                    if not strict:
                        kept.append(run)
                    elif dead is None and m == 1 and len(<list> run[0]) == 1:
                        dead = run
                    continue
                if len(new) == n:
                    self._complete(p, part, new, &env, bufs)
                if self._extendable(p, new):
                    kept.append(new)
            c = p.pos[0]
            if mask & (1 << c):
                start = self._advance_first(p, part, mask, &env, bufs, &pushed[0], dead)
                if start is not None:
                    if n == 1:
                        self._complete(p, part, start, &env, bufs)
                    if self._extendable(p, start):
                        kept.append(start)
        finally:
            for c in range(p.ncomp):
                if bufs[c] != NULL:
                    free(bufs[c])
        part.runs = kept or ()

    # -- middle negations that end the runs waiting at them (compile.py's
    # _kills_waiting): TollCharge's SEQ(n, NOT x, v) WHERE [vid] keeps no
    # state for a vehicle once x has passed n, instead of a day of x events.

    cdef i64 _waiting_lo(self, PlanRT p, Part part, int c):
        """The earliest timestamp at which a run waiting at middle negation
        c bound the positive before it (the negation's interval opens
        there); _NOBODY when no run waits at c."""
        cdef int k = p.prevpos[c]
        cdef Stack s = part.stacks[p.pos[k]]
        cdef i64 lo = _NOBODY, t
        for run in part.runs:
            if len(run) == k + 1:
                t = s.ts[<i64> run[k][0] - s.base]
                if t < lo:
                    lo = t
        return lo

    cdef bint _killed(self, PlanRT p, Part part, list run, Env* env, i64** bufs) except -1:
        """Is the run waiting at a killing middle negation c with an event of
        c strictly between the positive before it and now that passes c's
        checks? Every completion binds the next positive now or later, so
        that event blocks them all (ties: an event at the current timestamp
        blocks nothing yet, a completion at that same timestamp may pass)."""
        cdef int c, k = len(run) - 1
        cdef Stack s = part.stacks[p.pos[k]], ns
        cdef i64 lo, i
        cdef bint loaded = False
        for c in range(p.ncomp):
            if not p.killneg[c] or p.prevpos[c] != k:
                continue
            lo = s.ts[<i64> run[k][0] - s.base]
            ns = part.stacks[c]
            for i in range(ns.first_gt(lo), ns.n):
                if ns.ts[i] >= self._ts:
                    break
                if not loaded:
                    self._load_run(p, part, run, env, bufs)
                    loaded = True
                env.row[c] = i
                if negchecks(p, c, env):
                    return True
        return False

    cdef _trim(self, PlanRT p, Part part, object key):
        """After a step of a plan with a killing middle negation, or under
        contiguity without a skip: keep the
        negated events only from the earliest waiting run's interval on,
        the positive rows only from the earliest run's first event on (with
        a run strategy nothing else reads them, unless an end negation holds
        results that do), and drop the part once it holds nothing."""
        cdef int c
        cdef PyObject* sp
        cdef i64 first = _NOBODY, t
        for run in part.runs:
            t = self._run_first_ts(part, p, run)
            if t < first:
                first = t
        for c in range(p.ncomp):
            sp = PyTuple_GET_ITEM(part.stacks, c)  # borrowed (_run_first_ts)
            if (<Stack> sp).n == (<Stack> sp).head:
                continue
            if p.killneg[c]:
                t = self._waiting_lo(p, part, c)
                (<Stack> sp).prune(t if t != _NOBODY else self._ts)
            elif not p.negated[c] and not p.has_end_neg:
                (<Stack> sp).prune(first - 1 if first != _NOBODY else self._ts)
        if part.empty():
            keyed = self._parts[p.slot].get(self._pobj())
            if keyed is not None and keyed.get(key) is part:
                del keyed[key]
                if not keyed:
                    self._drop_partition(p, self._partition)

    cdef object _advance_first(self, PlanRT p, Part part, long mask, Env* env, i64** bufs,
                               i64* pushed, list dead):
        """A new run started by the current event (first component); made of
        `dead`'s lists when given (a run of one event that ended in this
        step, held by nothing else: under contiguity a moving car's run ends
        at each report as the next one starts, two lists freed and two made
        per report and plan otherwise)."""
        cdef int c = p.pos[0]
        cdef i64 r = self._row_for(p, part, c, pushed)  # may move the stack: before env
        self._load_run(p, part, _NO_RUN, env, bufs)
        if self._can_bind(p, part, _NO_RUN, 0, env,
                          r - (<Stack> PyTuple_GET_ITEM(part.stacks, c)).base):
            if dead is not None:
                (<list> dead[0])[0] = r
                return dead
            return [[r]]
        return None

    cdef bint _closed(self, PlanRT p, Part part, list run, Env* env, i64** bufs) except -1:
        """Is this run a complete match (every component bound, the last
        one within its bounds and its checks)? Loads it into env."""
        cdef int cl = p.pos[p.npos - 1]
        if len(run) < p.npos:
            return False
        self._load_run(p, part, run, env, bufs)
        if len(run[p.npos - 1]) < p.minc[cl]:
            return False
        return not p.kleene[cl] or checks(p, p.npos - 1, env)

    cdef _complete(self, PlanRT p, Part part, list run, Env* env, i64** bufs):
        if self._closed(p, part, run, env, bufs):
            self._finish(p, part, env)

    cdef _expire_runs(self, PlanRT p, Part part, i64 bound):
        """Drop the runs whose window ended (first event ts <= bound); with
        ON TIMEOUT, the ones that never completed derive a timeout event."""
        cdef Env env
        cdef i64* bufs[MAXC]
        cdef int c
        for run in part.runs:
            if self._run_first_ts(part, p, run) <= bound:
                break
        else:
            return  # none ended (most calls: a run per event under contiguity)
        kept = []
        for run in part.runs:
            if self._run_first_ts(part, p, run) > bound:
                kept.append(run)
            elif p.has_timeout:
                for c in range(MAXC):
                    bufs[c] = NULL
                try:
                    if not self._closed(p, part, run, &env, bufs):
                        self._load_run(p, part, run, &env, bufs)
                        self._put(p, self._derive_timeout(p, part, &env, run))
                finally:
                    for c in range(MAXC):
                        free(bufs[c])
        part.runs = kept or ()

    cdef object _derive_timeout(self, PlanRT p, Part part, Env* env, list run):
        cdef int k, c
        cdef Stack s
        cdef Cell v
        cdef u8 kd
        cdef i64 first_ts = self._run_first_ts(part, p, run)
        for k in range(len(run), p.npos):  # not bound yet
            c = p.pos[k]
            env.row[c] = -1
            env.klen[c] = 0
        fields = {}
        for name, prog in p.timeout_outputs:
            kd = eval_prog(p, prog, env, &v)
            fields[name] = pyvalue(kd, v, self._pool)
        seqs = []
        for k in range(len(run)):
            s = part.stacks[p.pos[k]]
            for r in run[k]:
                seqs.append(s.seq[<i64> r - s.base])
        return DerivedEvent(
            plan_id=p.plan_id,
            event_type=p.cp.plan.timeout.event_type,
            partition=self._partition,
            start_ts=first_ts,
            end_ts=first_ts + p.within,
            fields=fields,
            event_seqs=tuple(seqs),
        )


DIRECT_SLOTS = _DIRECT  # _derive writes DerivedEvent's slots directly (tests check it)

