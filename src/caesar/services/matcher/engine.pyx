# cython: language_level=3
"""The Cython pattern engine (SASE NFA with active instance stacks).

Per (plan, partition, equivalence key) a `Part` holds one `Stack` per
component: the events that may take that role, in timestamp order, with the
attribute values the plan reads (PAIS: the equivalence attributes [attr] are
part of the key, so an event only meets events it may match with).

- skip_till_any_match: an event enters the stack of component i>0 only if
  the stack of component i-1 holds an earlier event in the window (push-down
  into scan); an event of the last component triggers sequence construction,
  a depth-first search over the stacks that checks the window (construction
  push-down) and each WHERE conjunct as soon as its variables are bound.
- skip_till_next_match / strict_contiguity: runs (SASE+), each a list of
  bound rows; the same definitions as src/caesar/services/matcher/reference.py.
- negation: negated events are kept in their own stacks (start/middle) and
  probed by timestamp interval; results ending with a negation are held in
  `pending` until the window after their first event has closed.
- stacks are pruned by the window on every event of their part and on
  `advance`; empty parts are dropped, so state is bounded by the window.

Expressions run on a small stack VM over the instruction arrays built by
src/caesar/services/matcher/compile.py. Values are doubles with a kind tag (ints are
exact up to 2**53).
"""


import numpy as np

cimport cython
from libc.math cimport ceil, fabs, floor, fmod, isfinite, isnan
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memmove

from caesar.services.matcher.compile import compile_plan
from caesar.errors import PlanError
from caesar.plans.engine import DerivedEvent

# Layout of snapshot(): bump when it changes (stored with the state; a
# different value is refused on restore, never misread).
STATE_FORMAT = 1

cdef enum:
    K_MISSING = 0
    K_INT = 1
    K_FLOAT = 2
    K_STR = 3
    K_BOOL = 4

cdef enum:
    OP_CONST = 0
    OP_LOAD = 1
    OP_NEG = 2
    OP_NOT = 3
    OP_ADD = 4
    OP_SUB = 5
    OP_MUL = 6
    OP_DIV = 7
    OP_MOD = 8
    OP_EQ = 9
    OP_NE = 10
    OP_LT = 11
    OP_LE = 12
    OP_GT = 13
    OP_GE = 14
    OP_AND = 15
    OP_OR = 16
    OP_CALL = 17
    OP_AGG = 18

cdef i64 NO_TS = -(1 << 62)


# ---------------------------------------------------------------- stacks

cdef class Stack:
    """Rows in timestamp order; rows are addressed by absolute id
    (base + local index) so pruning the front keeps ids of live rows."""

    def __cinit__(self, int width):
        self.width = width
        self.n = 0
        self.head = 0
        self.cap = 0
        self.base = 0
        self.ts = NULL
        self.seq = NULL
        self.vals = NULL
        self.kinds = NULL

    def __dealloc__(self):
        free(self.ts)
        free(self.seq)
        free(self.vals)
        free(self.kinds)

    cdef void compact(self) noexcept:
        cdef i64 keep = self.n - self.head
        cdef int w = self.width
        if self.head == 0:
            return
        memmove(self.ts, self.ts + self.head, keep * sizeof(i64))
        memmove(self.seq, self.seq + self.head, keep * sizeof(i64))
        if w > 0:
            memmove(self.vals, self.vals + self.head * w, keep * w * sizeof(double))
            memmove(self.kinds, self.kinds + self.head * w, keep * w * sizeof(u8))
        self.base += self.head
        self.n = keep
        self.head = 0

    cdef i64 push(self, i64 ts, i64 seq, const double* v, const u8* k) except -1:
        cdef i64 cap
        cdef int w = self.width
        if self.n == self.cap:
            if self.head * 2 >= self.n and self.head > 0:
                self.compact()
            else:
                cap = 16 if self.cap == 0 else self.cap * 2
                self.ts = <i64*> realloc(self.ts, cap * sizeof(i64))
                self.seq = <i64*> realloc(self.seq, cap * sizeof(i64))
                self.vals = <double*> realloc(self.vals, cap * (w if w > 0 else 1) * sizeof(double))
                self.kinds = <u8*> realloc(self.kinds, cap * (w if w > 0 else 1) * sizeof(u8))
                if self.ts == NULL or self.seq == NULL or self.vals == NULL or self.kinds == NULL:
                    raise MemoryError()
                self.cap = cap
        self.ts[self.n] = ts
        self.seq[self.n] = seq
        if w > 0:
            memcpy(self.vals + self.n * w, v, w * sizeof(double))
            memcpy(self.kinds + self.n * w, k, w * sizeof(u8))
        self.n += 1
        return self.n - 1

    cdef void pop(self) noexcept:
        if self.n > self.head:
            self.n -= 1

    cdef void prune(self, i64 bound) noexcept:
        while self.head < self.n and self.ts[self.head] <= bound:
            self.head += 1
        if self.head == self.n and self.n > 0:
            self.base += self.n
            self.n = 0
            self.head = 0
        elif self.cap > 64 and self.head * 2 > self.n:
            self.compact()

    cdef i64 first_gt(self, i64 t) noexcept:
        cdef i64 lo = self.head, hi = self.n, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.ts[mid] <= t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def __len__(self):
        return self.n - self.head

    def state(self):
        cdef i64 h = self.head, m = self.n - self.head
        cdef int w = self.width
        ts = np.empty(m, dtype=np.int64)
        seq = np.empty(m, dtype=np.int64)
        vals = np.empty(m * w, dtype=np.float64)
        kinds = np.empty(m * w, dtype=np.uint8)
        cdef i64 i, j
        for i in range(m):
            ts[i] = self.ts[h + i]
            seq[i] = self.seq[h + i]
            for j in range(w):
                vals[i * w + j] = self.vals[(h + i) * w + j]
                kinds[i * w + j] = self.kinds[(h + i) * w + j]
        return (w, self.base + h, ts.tobytes(), seq.tobytes(), vals.tobytes(), kinds.tobytes())

    @staticmethod
    def from_state(state, int width):
        w, base, tsb, seqb, valsb, kindsb = state
        # State comes from a topic: check every size before copying rows.
        n = len(tsb) // 8
        if (w != width or len(tsb) != 8 * n or len(seqb) != 8 * n
                or len(valsb) != 8 * n * w or len(kindsb) != n * w):
            raise PlanError(f"matcher: stored stack does not fit the plan (width {w}, "
                            f"expected {width})")
        cdef Stack s = Stack(w)
        ts = np.frombuffer(tsb, dtype=np.int64)
        seq = np.frombuffer(seqb, dtype=np.int64)
        vals = np.frombuffer(valsb, dtype=np.float64)
        kinds = np.frombuffer(kindsb, dtype=np.uint8)
        cdef double[::1] vv
        cdef u8[::1] kv
        cdef i64 i
        for i in range(ts.shape[0]):
            vv = vals[i * w:(i + 1) * w].copy()
            kv = kinds[i * w:(i + 1) * w].copy()
            s.push(ts[i], seq[i], &vv[0] if w > 0 else NULL, &kv[0] if w > 0 else NULL)
        s.base = base
        return s


# ---------------------------------------------------------------- compiled plan

cdef int[::1] _ints(values):
    return np.array(list(values) or [0], dtype=np.int32)


cdef class PlanRT:
    def __cinit__(self):
        cdef int i
        for i in range(MAXC):
            self.scratch[i] = NULL
            self.scratch_k[i] = NULL

    def __init__(self, cp, int slot):
        cdef int i, j, c
        self.cp = cp
        self.plan_id = cp.plan.plan_id
        self.slot = slot
        self.strategy = cp.strategy
        self.within = cp.within
        self.ncomp = len(cp.comps)
        self.npos = len(cp.pos)
        self.has_end_neg = 1 if cp.has_end_negation else 0
        self.neq = len(cp.equivalence)
        self.last_sweep = NO_TS
        if self.neq > 8:
            raise PlanError(f"plan {self.plan_id}: more than 8 equivalence attributes")
        self.code = cp.code
        self.cvals = cp.const_vals.copy()
        self.ckinds = cp.const_kinds.copy()
        self.pstart = cp.prog_start
        self.plen = cp.prog_len
        for i in range(MAXC):
            self.rank[i] = -1
        for i, c in enumerate(cp.pos):
            self.pos[i] = c
            self.rank[c] = i
        ids, starts, ns = [], [], []
        for lst in cp.checks_at:
            starts.append(len(ids))
            ns.append(len(lst))
            ids.extend(lst)
        self.checks_ids, self.checks_start, self.checks_n = _ints(ids), _ints(starts), _ints(ns)
        ids, starts, ns = [], [], []
        for i, comp in enumerate(cp.comps):
            self.kleene[i] = 1 if comp.kleene else 0
            self.negated[i] = 1 if comp.negated else 0
            self.width[i] = len(comp.layout)
            self.iterf[i] = comp.iter_filter
            self.prevpos[i] = comp.prev_pos
            self.nextpos[i] = comp.next_pos
            for j in range(self.neq):
                self.eqcol[i][j] = comp.equiv_cols[j]
            starts.append(len(ids))
            ns.append(len(comp.neg_checks))
            ids.extend(comp.neg_checks)
            self.scratch[i] = <double*> malloc((self.width[i] + 1) * sizeof(double))
            self.scratch_k[i] = <u8*> malloc((self.width[i] + 1) * sizeof(u8))
        self.negchk_ids, self.negchk_start, self.negchk_n = _ints(ids), _ints(starts), _ints(ns)
        self.outputs = list(cp.outputs)
        self.leader = None
        self.share = 0
        for i in range(len(cp.prog_len)):
            if cp.prog_len[i] > MAXSTACK:
                raise PlanError(f"plan {self.plan_id}: expression too long")

    def __dealloc__(self):
        cdef int i
        for i in range(MAXC):
            free(self.scratch[i])
            free(self.scratch_k[i])

    def intern(self, pool):
        for idx, text in self.cp.const_strings:
            self.cvals[idx] = pool.code(text)


# ---------------------------------------------------------------- expression VM

cdef inline bint _isnum(u8 k) noexcept:
    return k == K_INT or k == K_FLOAT or k == K_BOOL


cdef inline int _truth(u8 k, double v) noexcept:
    if k == K_INT or k == K_FLOAT or k == K_BOOL:
        return 1 if v != 0 else 0
    return -1


cdef inline u8 _numkind(u8 k) noexcept:
    return K_FLOAT if k == K_FLOAT else K_INT


cdef u8 _aggregate(PlanRT p, int func, int c, int sub, Env* env, double* out) except 255:
    cdef int n = env.klen[c], j, m = 0, i, dup
    cdef i64 saved = env.row[c]
    cdef double v = 0, acc = 0, best = 0
    cdef u8 k, bestk = K_MISSING, acck = K_INT
    cdef double* seen_v = NULL
    cdef u8* seen_k = NULL
    if func == 1:
        seen_v = <double*> malloc((n + 1) * sizeof(double))
        seen_k = <u8*> malloc((n + 1) * sizeof(u8))
    try:
        for j in range(n):
            env.row[c] = env.klist[c][j]
            if sub < 0:
                v = 1
                k = K_BOOL
            else:
                k = _eval(p, sub, env, &v)
            if func == 6:  # first
                if j == 0:
                    best = v
                    bestk = k
                continue
            if func == 7:  # last
                best = v
                bestk = k
                continue
            if k == K_MISSING:
                continue
            if func == 0:
                m += 1
            elif func == 1:
                dup = 0
                for i in range(m):
                    if (seen_k[i] == K_STR) == (k == K_STR) and seen_v[i] == v:
                        dup = 1
                        break
                if not dup:
                    seen_v[m] = v
                    seen_k[m] = k
                    m += 1
            elif _isnum(k):
                if func == 2 or func == 3:
                    acc += v
                    if k == K_FLOAT:
                        acck = K_FLOAT
                    m += 1
                elif func == 4:
                    if m == 0 or v < best:
                        best = v
                        bestk = _numkind(k)
                    m += 1
                elif func == 5:
                    if m == 0 or v > best:
                        best = v
                        bestk = _numkind(k)
                    m += 1
    finally:
        env.row[c] = saved
        free(seen_v)
        free(seen_k)
    if func == 0 or func == 1:
        out[0] = m
        return K_INT
    if func == 6 or func == 7:
        out[0] = best
        return bestk
    if m == 0:
        return K_MISSING
    if func == 2:
        out[0] = acc
        return acck
    if func == 3:
        out[0] = acc / m
        return K_FLOAT
    out[0] = best
    return bestk


@cython.boundscheck(False)
cdef u8 _eval(PlanRT p, int prog, Env* env, double* out) except 255:
    cdef double sv[MAXSTACK]
    cdef u8 sk[MAXSTACK]
    cdef int sp = 0, pc, end, op, a, b, c, ta, tb, i
    cdef double x, y, r
    cdef u8 kx, ky
    pc = p.pstart[prog]
    end = pc + p.plen[prog]
    while pc < end:
        op = p.code[pc, 0]
        a = p.code[pc, 1]
        b = p.code[pc, 2]
        c = p.code[pc, 3]
        pc += 1
        if op == OP_LOAD:
            i = <int> (env.row[a] * env.width[a] + b)
            sv[sp] = env.vals[a][i]
            sk[sp] = env.kinds[a][i]
            sp += 1
        elif op == OP_CONST:
            sv[sp] = p.cvals[a]
            sk[sp] = p.ckinds[a]
            sp += 1
        elif op == OP_NEG:
            if _isnum(sk[sp - 1]):
                sv[sp - 1] = -sv[sp - 1]
                sk[sp - 1] = _numkind(sk[sp - 1])
            else:
                sk[sp - 1] = K_MISSING
        elif op == OP_NOT:
            ta = _truth(sk[sp - 1], sv[sp - 1])
            if ta < 0:
                sk[sp - 1] = K_MISSING
            else:
                sv[sp - 1] = 1 - ta
                sk[sp - 1] = K_BOOL
        elif op <= OP_MOD:
            sp -= 1
            x = sv[sp - 1]
            y = sv[sp]
            kx = sk[sp - 1]
            ky = sk[sp]
            if not (_isnum(kx) and _isnum(ky)):
                sk[sp - 1] = K_MISSING
                continue
            kx = K_FLOAT if (kx == K_FLOAT or ky == K_FLOAT) else K_INT
            if op == OP_ADD:
                r = x + y
            elif op == OP_SUB:
                r = x - y
            elif op == OP_MUL:
                r = x * y
            elif y == 0:
                sk[sp - 1] = K_MISSING
                continue
            elif op == OP_DIV:
                r = x / y
                kx = K_FLOAT
            else:
                r = fmod(x, y)
                if r != 0 and ((r < 0) != (y < 0)):
                    r += y
            sv[sp - 1] = r
            sk[sp - 1] = kx
        elif op <= OP_GE:
            sp -= 1
            x = sv[sp - 1]
            y = sv[sp]
            kx = sk[sp - 1]
            ky = sk[sp]
            if kx == K_MISSING or ky == K_MISSING:
                sk[sp - 1] = K_MISSING
                continue
            if kx == K_STR or ky == K_STR:
                if kx != ky or (op != OP_EQ and op != OP_NE):
                    sk[sp - 1] = K_MISSING
                    continue
            elif isnan(x) or isnan(y):
                sk[sp - 1] = K_MISSING
                continue
            if op == OP_EQ:
                ta = x == y
            elif op == OP_NE:
                ta = x != y
            elif op == OP_LT:
                ta = x < y
            elif op == OP_LE:
                ta = x <= y
            elif op == OP_GT:
                ta = x > y
            else:
                ta = x >= y
            sv[sp - 1] = ta
            sk[sp - 1] = K_BOOL
        elif op == OP_AND or op == OP_OR:
            sp -= 1
            ta = _truth(sk[sp - 1], sv[sp - 1])
            tb = _truth(sk[sp], sv[sp])
            if op == OP_AND:
                if ta == 0 or tb == 0:
                    ta = 0
                elif ta < 0 or tb < 0:
                    ta = -1
                else:
                    ta = 1
            else:
                if ta == 1 or tb == 1:
                    ta = 1
                elif ta < 0 or tb < 0:
                    ta = -1
                else:
                    ta = 0
            if ta < 0:
                sk[sp - 1] = K_MISSING
            else:
                sv[sp - 1] = ta
                sk[sp - 1] = K_BOOL
        elif op == OP_CALL:
            # a = function, b = number of arguments
            sp -= b
            kx = K_INT
            for i in range(b):
                if not _isnum(sk[sp + i]):
                    kx = K_MISSING
                    break
            if kx == K_MISSING or b == 0:
                sk[sp] = K_MISSING
                sp += 1
                continue
            x = sv[sp]
            kx = _numkind(sk[sp])
            if a == 0:
                r = fabs(x)
            elif a == 1 or a == 2:
                if not isfinite(x):
                    sk[sp] = K_MISSING
                    sp += 1
                    continue
                r = floor(x) if a == 1 else ceil(x)
                kx = K_INT
            else:
                r = x
                for i in range(1, b):
                    y = sv[sp + i]
                    if (a == 3 and y < r) or (a == 4 and y > r):
                        r = y
                        kx = _numkind(sk[sp + i])
            sv[sp] = r
            sk[sp] = kx
            sp += 1
        elif op == OP_AGG:
            sk[sp] = _aggregate(p, a, b, c, env, &sv[sp])
            sp += 1
    if sp <= 0:
        return K_MISSING
    out[0] = sv[sp - 1]
    return sk[sp - 1]


cdef inline bint _holds(PlanRT p, int prog, Env* env) except -1:
    cdef double v = 0
    cdef u8 k = _eval(p, prog, env, &v)
    return _truth(k, v) == 1


cdef bint _checks(PlanRT p, int level, Env* env) except -1:
    cdef int i, s = p.checks_start[level], n = p.checks_n[level]
    for i in range(n):
        if not _holds(p, p.checks_ids[s + i], env):
            return False
    return True


cdef bint _negchecks(PlanRT p, int c, Env* env) except -1:
    cdef int i, s = p.negchk_start[c], n = p.negchk_n[c]
    for i in range(n):
        if not _holds(p, p.negchk_ids[s + i], env):
            return False
    return True


cdef object _pyvalue(u8 k, double v, pool):
    if k == K_INT:
        return int(v)
    if k == K_FLOAT:
        return v
    if k == K_BOOL:
        return v != 0
    if k == K_STR:
        return pool.string(<int> v)
    return None


cdef inline bint _eq_vals(double* va, u8* ka, double* vb, u8* kb, PlanRT p, int ca, int cb) noexcept:
    """Equivalence test between a row of component ca and a row of cb."""
    cdef int j, ia, ib
    for j in range(p.neq):
        ia = p.eqcol[ca][j]
        ib = p.eqcol[cb][j]
        if ia < 0 or ib < 0:
            return False
        if ka[ia] == K_MISSING or kb[ib] == K_MISSING:
            return False
        if (ka[ia] == K_STR) != (kb[ib] == K_STR):
            return False
        if not (va[ia] == vb[ib]):
            return False
    return True


# ---------------------------------------------------------------- per-key state

@cython.no_gc
cdef class Part:
    # Parts are many (one per plan and key) and never form cycles; keeping
    # them (and their empty containers, shared `()`) out of the cyclic GC
    # keeps collections from scanning the whole state.
    cdef public tuple stacks   # Stack per component index
    cdef public object runs    # run = list (per positive component) of lists of absolute row ids
    cdef public object pending  # [deadline, DerivedEvent, rows]
    cdef public object ready   # [deadline, DerivedEvent]
    cdef public object key     # (partition, equivalence key)

    def __init__(self, PlanRT p, key=None):
        cdef int c
        self.key = key
        self.stacks = tuple([Stack(p.width[c]) for c in range(p.ncomp)])
        self.runs = ()
        self.pending = ()
        self.ready = ()

    cdef bint empty(self):
        cdef Stack s
        if self.runs or self.pending or self.ready:
            return False
        for s in self.stacks:
            if s.n > s.head:
                return False
        return True


cdef class _Group:
    """Events of one type that pass one set of pushed-down filters; shared
    by every (plan, component) with the same filters (evaluated once)."""
    cdef public PlanRT rep
    cdef public int comp
    cdef public list filters
    cdef public list members   # (PlanRT, comp index)
    cdef public object mapping
    cdef public int[::1] slots   # members, as arrays for the hot loop
    cdef public int[::1] comps

    def __init__(self, PlanRT rep, int comp, list filters):
        self.rep = rep
        self.comp = comp
        self.filters = filters
        self.members = []


# ---------------------------------------------------------------- the engine

cdef class CythonEngine:
    cdef list _plans
    cdef dict _by_id
    cdef dict _parts          # slot -> {partition -> {eqkey -> Part}}
    cdef dict _type_cols      # type -> tuple of attribute names (batch matrix layout)
    cdef dict _tid            # type -> dense id
    cdef list _type_groups    # by type id: unindexed _Group list
    cdef list _type_index     # by type id: [(type col, {value -> [_Group]})]
    cdef list _maps           # ((slot * MAXC) + comp) * ntypes + tid -> col map (None = identity)
    cdef int _ntypes
    cdef list _strict         # plans with strict contiguity (see every event)
    # Active-node index (Cayuga AN): for skip-till-any-match, component k>0
    # only needs an event when component k-1 holds one in the same PAIS key.
    # by type id: [(type cols of the equivalence attrs, {eqkey: {slot: comp mask}})]
    cdef list _an_specs
    cdef dict _an_tables      # (slot, comp) -> [table dicts to register in]
    cdef dict _waiting        # slot -> set of parts holding pending/ready results
    cdef object _pool
    cdef list _out
    cdef long* _masks         # per plan slot: components the current event reaches
    cdef int* _hits
    cdef int _nhit
    cdef u8[::1] _act
    cdef bint _use_act
    # current event (valid while one event is dispatched)
    cdef i64 _ts, _seq, _partition
    cdef double* _row_v
    cdef u8* _row_k
    cdef i64 _lo
    cdef Part _part
    cdef PlanRT _plan
    cdef list _followers      # plans sharing a prefix with a leader plan
    cdef i64 _last_local
    cdef int _last_comp

    def __cinit__(self, *args, **kwargs):
        self._masks = NULL
        self._hits = NULL

    def __dealloc__(self):
        free(self._masks)
        free(self._hits)

    def __init__(self, plans, share_prefixes=True):
        cdef PlanRT p
        cdef int slot
        self._plans = []
        self._followers = []
        self._by_id = {}
        for slot, plan in enumerate(plans):
            p = PlanRT(compile_plan(plan), slot)
            self._plans.append(p)
            self._by_id[p.plan_id] = p
        self._parts = {p.slot: {} for p in self._plans}
        self._waiting = {p.slot: set() for p in self._plans}
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
        self._strict = [p for p in self._plans if p.strategy == 2]
        self._type_groups = [[] for _ in range(self._ntypes)]
        self._type_index = [[] for _ in range(self._ntypes)]
        self._an_specs = [[] for _ in range(self._ntypes)]
        self._an_tables = {}
        self._masks = <long*> malloc((len(self._plans) + 1) * sizeof(long))
        self._hits = <int*> malloc((len(self._plans) + 1) * sizeof(int))
        for slot in range(len(self._plans) + 1):
            self._masks[slot] = 0
        self._nhit = 0
        if share_prefixes:
            self._plan_sharing()

    def _plan_sharing(self):
        """Common prefixes (Cayuga thesis ch. 4, shared automaton prefixes):
        a plan whose leading positive components (types, pushed filters,
        layout) equal those of an earlier plan with the same window,
        equivalence and skip-till-any-match strategy becomes its follower:
        it never stores or scans those components itself but reads the
        leader's stacks of the same PAIS key, and it is dispatched from its
        first own component on. The stacks of a prefix depend only on the
        events fed and the prefix itself, so sharing them gives the same
        matches. Plans with an end negation are left alone (their pending
        results pin rows the partner could prune). A follower's first own
        positive component is dispatched eagerly, so sharing is only worth
        it when the constant index can route that one (`attr = const`);
        otherwise the plan keeps its own state and the active-node index."""
        cdef PlanRT p, q
        cdef int d, dmax
        leaders = {}
        for p in self._plans:
            if p.strategy != 0 or p.has_end_neg:
                continue
            dmax = 0
            while dmax < p.npos - 1 and p.pos[dmax] == dmax and not p.kleene[dmax]:
                dmax += 1
            if dmax == 0:
                continue
            sig = [(p.within, p.cp.equivalence)]
            for d in range(dmax):
                sig.append((p.cp.comps[d].types, p.cp.comps[d].filter_key))
            q = None
            for d in range(dmax, 0, -1):
                q = leaders.get(tuple(sig[:d + 1]))
                if q is not None:
                    break
            if q is not None and p.cp.comps[p.pos[d]].const_eq is not None:
                p.leader = q
                p.share = d
                self._followers.append(p)
            elif q is None:
                for d in range(1, dmax + 1):
                    leaders[tuple(sig[:d + 1])] = p

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
                    part.stacks = tuple([Stack.from_state(s.state(), s.width) for s in src]) + \
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
                part = Part(p, (partition, key))
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
        if lp is not None and part.stacks[0] is not lp.stacks[0]:
            part.stacks = lp.stacks[:p.share] + part.stacks[p.share:]

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
            for c, comp in enumerate(p.cp.comps):
                if c < p.share:
                    continue  # the leader scans and stores the shared prefix
                if p.strategy == 0 and p.leader is None and (
                        (not p.negated[c] and p.rank[c] > 0)
                                        or (p.negated[c] and p.prevpos[c] >= 0)):
                    # lazy: reached through the active-node index only
                    tables = []
                    for t in comp.types:
                        cols = self._type_cols[t]
                        if any(a not in cols for a in p.cp.equivalence):
                            continue  # can never satisfy the equivalence test
                        skey = (t, p.cp.equivalence)
                        spec = specs.get(skey)
                        if spec is None:
                            spec = (np.array([cols.index(a) for a in p.cp.equivalence] or [0],
                                             dtype=np.int32), len(p.cp.equivalence), {})
                            specs[skey] = spec
                        tables.append(spec[2])
                    self._an_tables[(p.slot, c)] = tables
                    continue
                for t in comp.types:
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
                key = float(pool.code(value)) if isinstance(value, str) else float(value)
                col = cols.index(attr)
                idx = index_by_type.setdefault(t, {})
                idx.setdefault(col, {}).setdefault(key, []).append(g)
            else:
                self._type_groups[self._tid[t]].append(g)
        self._an_specs = [[] for _ in range(self._ntypes)]
        for (t, _eq), spec in specs.items():
            self._an_specs[self._tid[t]].append(spec)
        self._relink_an()
        self._type_index = [[] for _ in range(self._ntypes)]
        for t, d in index_by_type.items():
            self._type_index[self._tid[t]] = list(d.items())

    # -- protocol ---------------------------------------------------------

    def process(self, batch, active=None):
        cdef PlanRT p
        pool = batch.strings
        if pool is not self._pool:
            # stored rows hold interned codes of the previous pool
            if self._pool is not None and self.state_size() > 0:
                raise PlanError("matcher: a batch came with a different StringPool while "
                                "partial matches are held; use one pool per pipeline")
            self._pool = pool
            self._build_dispatch(pool)
        self._out = []
        self._use_act = active is not None
        if self._use_act:
            act = np.zeros(len(self._plans) + 1, dtype=np.uint8)
            for pid in active:
                p = self._by_id.get(pid)
                if p is not None:
                    act[p.slot] = 1
            self._act = act
            for p in self._followers:
                if act[p.slot] != act[(<PlanRT> p.leader).slot]:
                    self._unshare()
                    break
        # only types some plan reads (strict contiguity: every event counts)
        tids, mats, kinds, tss, seqs, parts = [], [], [], [], [], []
        width = 1
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
            mat = np.zeros((n, max(len(names), 1)), dtype=np.float64)
            kin = np.zeros((n, max(len(names), 1)), dtype=np.uint8)
            for j, a in enumerate(names):
                arr = cols.columns.get(a)
                if arr is None:
                    continue
                mat[:, j] = arr
                dk = arr.dtype
                kind = K_INT if dk == np.int64 else K_FLOAT if dk.kind == "f" else \
                    K_STR if dk == np.int32 else K_BOOL if dk == np.int8 else K_INT
                kin[:, j] = kind
                if kind == K_STR:
                    kin[arr < 0, j] = K_MISSING
                nm = cols.nulls.get(a)
                if nm is not None:
                    kin[nm, j] = K_MISSING
            width = max(width, mat.shape[1])
            tids.append(tid)
            mats.append(mat)
            kinds.append(kin)
            tss.append(np.asarray(cols.ts, dtype=np.int64))
            seqs.append(np.asarray(cols.seq, dtype=np.int64))
            parts.append(np.asarray(cols.partition, dtype=np.int64))
        if not tids:
            return []
        # merge the types back into one arrival-ordered stream
        all_seq = np.concatenate(seqs)
        ne = all_seq.shape[0]
        order = np.argsort(all_seq, kind="stable")
        where = np.empty(ne, dtype=np.int64)
        where[order] = np.arange(ne, dtype=np.int64)
        ev_vals = np.zeros((ne, width), dtype=np.float64)
        ev_kinds = np.zeros((ne, width), dtype=np.uint8)
        ev_tid = np.empty(ne, dtype=np.int32)
        ev_ts = np.concatenate(tss)[order]
        ev_seq = all_seq[order]
        ev_part = np.concatenate(parts)[order]
        off = 0
        for i in range(len(tids)):
            n = mats[i].shape[0]
            at = where[off:off + n]
            ev_vals[at, :mats[i].shape[1]] = mats[i]
            ev_kinds[at, :mats[i].shape[1]] = kinds[i]
            ev_tid[at] = tids[i]
            off += n
        self._run_batch(ev_vals, ev_kinds, ev_tid, ev_ts, ev_seq, ev_part)
        out = self._out
        self._out = []
        return out

    def advance(self, watermark):
        """Release end-negation results whose window closed; sweep state
        older than the window. Parts touched by events are pruned as they
        are touched; the full sweep (for parts no event reaches any more)
        runs once per half window of event time, so state stays within
        1.5 windows without visiting every part on every call."""
        cdef PlanRT p
        cdef Part part
        cdef Stack s
        cdef i64 wm = watermark, bound
        out = []
        for p in self._plans:
            waiting = self._waiting[p.slot]
            if waiting:
                for part in list(waiting):
                    keep = []
                    for item in part.ready:
                        if item[0] <= wm:
                            out.append(item[1])
                        else:
                            keep.append(item)
                    part.ready = keep or ()
                    keep = []
                    for item in part.pending:
                        if item[0] <= wm:
                            out.append(item[1])
                        else:
                            keep.append(item)
                    part.pending = keep or ()
                    if not part.pending and not part.ready:
                        waiting.discard(part)
            if p.within < 0 or wm - p.last_sweep < max(1, p.within // 2):
                continue
            p.last_sweep = wm
            bound = wm - p.within
            bypart = self._parts[p.slot]
            for partition in list(bypart):
                keyed = bypart[partition]
                for key in list(keyed):
                    part = keyed[key]
                    if part.runs:  # before pruning: runs point into the stacks
                        part.runs = [r for r in part.runs
                                     if self._run_first_ts(part, p, r) > bound] or ()
                    for s in part.stacks:
                        s.prune(bound)
                    if part.empty():
                        del keyed[key]
                        self._an_forget(p, partition, key)
                if not keyed:
                    del bypart[partition]
        return out

    def discard(self, plan_ids, partition):
        cdef PlanRT p
        if self._followers:
            ids = set(plan_ids)
            for p in self._followers:
                if (p.plan_id in ids) != ((<PlanRT> p.leader).plan_id in ids):
                    self._unshare()
                    break
        for pid in plan_ids:
            p = self._by_id.get(pid)
            if p is not None:
                keyed = self._parts[p.slot].pop(partition, None)
                for key, part in (keyed or {}).items():
                    self._an_forget(p, partition, key)
                    self._waiting[p.slot].discard(part)

    def snapshot(self, partition):
        """This partition's run state as plain data (services/store/state_format.py):
        {plan id: [[equivalence key, [stack state, ...], runs, pending, ready], ...]}
        with derived events as dicts; only plans holding something appear."""
        cdef PlanRT p
        cdef Part part
        cdef Stack s
        state = {}
        for p in self._plans:
            if p.leader is not None:
                self._materialize(p, partition)
                for key, part in self._parts[p.slot].get(partition, {}).items():
                    self._relink(p, part, partition, key)
            keyed = self._parts[p.slot].get(partition)
            if not keyed:
                continue
            state[p.plan_id] = [
                [list(key) if isinstance(key, tuple) else key,
                 [list(s.state()) for s in part.stacks], [list(r) for r in part.runs],
                 [[d, _event_data(ev), rows] for d, ev, rows in part.pending],
                 [[d, _event_data(ev)] for d, ev in part.ready]]
                for key, part in keyed.items()]
        return state

    def restore(self, partition, state):
        """The inverse of snapshot(); plans not in `state` start empty."""
        cdef PlanRT p
        cdef Part part
        self._unshare()  # restored stacks are per plan
        self.discard([p.plan_id for p in self._plans], partition)
        for pid, parts in state.items():
            p = self._by_id.get(pid)
            if p is None:
                raise PlanError(f"matcher: state of unknown plan {pid!r}")
            keyed = self._parts[p.slot].setdefault(partition, {})
            for key, stacks, runs, pending, ready in parts:
                key = tuple(key) if isinstance(key, list) else key
                part = Part(p, (partition, key))
                if len(stacks) != p.ncomp:
                    raise PlanError(f"matcher: stored state of {pid} has {len(stacks)} "
                                    f"stacks, the plan {p.ncomp}")
                part.stacks = tuple([Stack.from_state(st, p.width[c])
                                     for c, st in enumerate(stacks)])
                part.runs = [list(r) for r in runs] or ()
                part.pending = [[d, _event_from(ev), rows] for d, ev, rows in pending] or ()
                part.ready = [[d, _event_from(ev)] for d, ev in ready] or ()
                keyed[key] = part
                if part.pending or part.ready:
                    self._waiting[p.slot].add(part)
        self._relink_an()

    def state_size(self):
        """Number of stored rows, runs and pending results (memory tests)."""
        cdef Part part
        cdef Stack s
        total = 0
        for bypart in self._parts.values():
            for keyed in bypart.values():
                for part in keyed.values():
                    total += len(part.runs) + len(part.pending) + len(part.ready)
                    for s in part.stacks:
                        total += s.n - s.head
        return total

    # -- event loop -------------------------------------------------------

    @cython.boundscheck(False)
    cdef _run_batch(self, double[:, ::1] vals, u8[:, ::1] kinds, int[::1] tids,
                    i64[::1] ts, i64[::1] seq, i64[::1] part):
        cdef Py_ssize_t e, ne = tids.shape[0]
        cdef int tid, h, slot, col
        cdef _Group g
        cdef PlanRT p
        cdef long m
        cdef list groups, index
        for e in range(ne):
            tid = tids[e]
            self._ts = ts[e]
            self._seq = seq[e]
            self._partition = part[e]
            self._row_v = &vals[e, 0]
            self._row_k = &kinds[e, 0]
            self._nhit = 0
            groups = self._type_groups[tid]
            for g in groups:
                self._offer(g, tid)
            index = self._type_index[tid]
            if index:
                for col, table in index:
                    if kinds[e, col] == K_MISSING:
                        continue
                    hit = table.get(vals[e, col])
                    if hit is not None:
                        for g in hit:
                            self._offer(g, tid)
            if self._an_specs[tid]:
                self._offer_an(tid, e, vals, kinds)
            for p in self._strict:
                if (not self._use_act or self._act[p.slot]) and self._masks[p.slot] == 0:
                    self._hits[self._nhit] = p.slot
                    self._nhit += 1
                    self._masks[p.slot] = 1 << MAXC  # present, reaches no component
            for h in range(self._nhit):
                slot = self._hits[h]
                m = self._masks[slot] & ((1 << MAXC) - 1)
                self._masks[slot] = 0
                self._on_plan(<PlanRT> self._plans[slot], m, tid)

    cdef int _offer_an(self, int tid, Py_ssize_t e, double[:, ::1] vals,
                       u8[:, ::1] kinds) except -1:
        cdef int j, n, c, slot
        cdef int[::1] cols
        cdef double v
        cdef long m
        cdef PlanRT p
        cdef Env env
        for spec in self._an_specs[tid]:
            cols = spec[0]
            n = spec[1]
            if n == 0:
                key = 0
            elif n == 1:
                if kinds[e, cols[0]] == K_MISSING or isnan(vals[e, cols[0]]):
                    continue
                key = vals[e, cols[0]]
            else:
                parts = []
                for j in range(n):
                    v = vals[e, cols[j]]
                    if kinds[e, cols[j]] == K_MISSING or isnan(v):
                        break
                    parts.append(v)
                if len(parts) < n:
                    continue
                key = tuple(parts)
            slots = (<dict> spec[2]).get((self._partition, key))
            if not slots:
                continue
            for slot, m in slots.items():
                if self._use_act and not self._act[slot]:
                    continue
                p = self._plans[slot]
                for c in range(p.ncomp):
                    if not (m & (1 << c)):
                        continue
                    if p.cp.comps[c].filters:
                        self._extract(p, c, tid)
                        env.vals[c] = p.scratch[c]
                        env.kinds[c] = p.scratch_k[c]
                        env.width[c] = p.width[c]
                        env.row[c] = 0
                        if not all(_holds(p, f, &env) for f in p.cp.comps[c].filters):
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
                if not _holds(rep, f, &env):
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
        mp_o = self._maps[(p.slot * MAXC + c) * self._ntypes + tid]
        cdef int[::1] mp
        cdef int j, w = p.width[c], src
        cdef double* dv = p.scratch[c]
        cdef u8* dk = p.scratch_k[c]
        if mp_o is None:
            memcpy(dv, self._row_v, w * sizeof(double))
            memcpy(dk, self._row_k, w * sizeof(u8))
            return 0
        mp = mp_o
        for j in range(w):
            src = mp[j]
            if src < 0:
                dv[j] = 0
                dk[j] = K_MISSING
            else:
                dv[j] = self._row_v[src]
                dk[j] = self._row_k[src]
        return 0

    cdef object _eqkey(self, PlanRT p, int c):
        cdef int j, col
        if p.neq == 0:
            return 0
        if p.neq == 1:
            col = p.eqcol[c][0]
            if col < 0 or p.scratch_k[c][col] == K_MISSING or isnan(p.scratch[c][col]):
                return None
            return p.scratch[c][col]
        key = []
        for j in range(p.neq):
            col = p.eqcol[c][j]
            if col < 0 or p.scratch_k[c][col] == K_MISSING or isnan(p.scratch[c][col]):
                return None
            key.append(p.scratch[c][col])
        return tuple(key)

    cdef Part _get_part(self, PlanRT p, object key):
        cdef dict bypart = self._parts[p.slot]
        cdef dict keyed = bypart.get(self._partition)
        if keyed is None:
            keyed = {}
            bypart[self._partition] = keyed
        part = keyed.get(key)
        if part is None:
            part = Part(p, (self._partition, key))
            keyed[key] = part
        return <Part> part

    cdef _on_plan(self, PlanRT p, long mask, int tname):
        cdef int c, k, first = -1
        cdef Part part
        cdef Stack s
        cdef i64 bound
        for c in range(p.ncomp):
            if mask & (1 << c):
                self._extract(p, c, tname)
                if first < 0:
                    first = c
        if p.strategy == 2:
            key = 0
        else:
            if first < 0:
                return
            key = self._eqkey(p, first)
            if key is None:
                return
        part = self._get_part(p, key)
        if p.leader is not None:
            self._relink(p, part, self._partition, key)
        # results waiting for an end negation whose window is over can no
        # longer be killed; move them aside so their rows may be pruned
        if part.pending:
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
            if part.runs:  # before pruning: runs point into the stacks
                part.runs = [r for r in part.runs
                             if self._run_first_ts(part, p, r) > bound] or ()
            for s in part.stacks:
                if s.n > s.head and s.ts[s.head] <= bound:
                    s.prune(bound)
        # negated events: kept for start/middle negation probes; a middle
        # one only matters while an instance of the positive before it exists
        for c in range(p.ncomp):
            if not (p.negated[c] and (mask & (1 << c))):
                continue
            if p.strategy == 0 and p.prevpos[c] >= 0:
                if p.nextpos[c] < 0:
                    if not part.pending:
                        self._an_register(p, c, part.key, False)  # stale entry
                    continue
                s = part.stacks[p.pos[p.prevpos[c]]]
                if s.n == s.head:
                    self._an_register(p, c, part.key, False)  # stale entry
                    continue
            if p.nextpos[c] >= 0:
                s = part.stacks[c]
                s.push(self._ts, self._seq, p.scratch[c], p.scratch_k[c])
        if p.strategy == 0:
            self._any(p, part, mask, key)
        else:
            self._runs_step(p, part, mask)

    # -- skip till any match: AIS + DFS --------------------------------------

    def _relink_an(self):
        """Register every non-empty stack in the active-node index (after
        the index is rebuilt or state is restored)."""
        cdef PlanRT p
        cdef Part part
        cdef Stack s
        cdef int k
        for p in self._plans:
            if p.strategy != 0:
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
        """Positive position k got its first instance: the next positive
        component and the middle negations right after k become live."""
        cdef int c
        self._an_register(p, p.pos[k + 1], pkey, True)
        for c in range(p.ncomp):
            if p.negated[c] and p.prevpos[c] == k and p.nextpos[c] >= 0:
                self._an_register(p, c, pkey, True)

    cdef _an_register_end(self, PlanRT p, object pkey):
        cdef int c
        for c in range(p.ncomp):
            if p.negated[c] and p.nextpos[c] < 0:
                self._an_register(p, c, pkey, True)

    cdef _an_register(self, PlanRT p, int c, object key, bint on):
        cdef dict table, slots
        tables = self._an_tables.get((p.slot, c))
        if not tables:
            return
        for table in tables:
            slots = table.get(key)
            if on:
                if slots is None:
                    table[key] = {p.slot: 1 << c}
                else:
                    slots[p.slot] = slots.get(p.slot, 0) | (1 << c)
            elif slots is not None and p.slot in slots:
                m = slots[p.slot] & ~(1 << c)
                if m:
                    slots[p.slot] = m
                else:
                    del slots[p.slot]
                    if not slots:
                        del table[key]

    cdef _any(self, PlanRT p, Part part, long mask, object key):
        cdef int k, c
        cdef Stack s, prev
        cdef i64 row
        for k in range(p.npos - 1, -1, -1):
            c = p.pos[k]
            if not (mask & (1 << c)):
                continue
            if k > 0:
                prev = part.stacks[p.pos[k - 1]]
                if prev.n == prev.head:
                    self._an_register(p, c, (self._partition, key), False)  # stale entry
                    continue
                if prev.ts[prev.head] >= self._ts:
                    continue  # no earlier event can precede it: not worth keeping
            s = part.stacks[c]
            if k < p.npos - 1:
                if s.n == s.head:
                    self._an_register_after(p, k, part.key)
                s.push(self._ts, self._seq, p.scratch[c], p.scratch_k[c])
                continue
            row = s.push(self._ts, self._seq, p.scratch[c], p.scratch_k[c])
            self._construct(p, part, row)
            if not p.kleene[c] and not p.has_end_neg:
                s.pop()

    cdef _construct(self, PlanRT p, Part part, i64 last_row):
        cdef Env env
        cdef int c, k
        cdef Stack s
        cdef i64* bufs[MAXC]
        self._plan = p
        self._part = part
        self._last_local = last_row
        self._lo = self._ts - p.within if p.within >= 0 else NO_TS
        for c in range(MAXC):
            bufs[c] = NULL
        try:
            for c in range(p.ncomp):
                s = part.stacks[c]
                env.vals[c] = s.vals
                env.kinds[c] = s.kinds
                env.width[c] = s.width
                env.row[c] = 0
                env.klen[c] = 0
                env.klist[c] = NULL
                if p.kleene[c]:
                    bufs[c] = <i64*> malloc((s.n - s.head + 2) * sizeof(i64))
                    env.klist[c] = bufs[c]
            self._dfs(p, part, &env, 0, NO_TS)
        finally:
            for c in range(MAXC):
                free(bufs[c])

    cdef int _dfs(self, PlanRT p, Part part, Env* env, int k, i64 after) except -1:
        cdef int c = p.pos[k]
        cdef Stack s = part.stacks[c]
        cdef i64 i, start, lo = after if after > self._lo else self._lo
        cdef bint last = k == p.npos - 1
        if p.kleene[c]:
            return self._kleene(p, part, env, k, 0, lo)
        if last:
            env.row[c] = self._last_local
            if _checks(p, k, env):
                self._finish(p, part, env)
            return 0
        start = s.first_gt(lo)
        for i in range(start, s.n):
            if s.ts[i] >= self._ts:
                break
            env.row[c] = i
            if _checks(p, k, env):
                self._dfs(p, part, env, k + 1, s.ts[i])
        return 0

    cdef int _kleene(self, PlanRT p, Part part, Env* env, int k, int m, i64 after) except -1:
        """Kleene component k holds m elements so far; choose the next one
        after `after`, then either close the component or keep iterating."""
        cdef int c = p.pos[k]
        cdef Stack s = part.stacks[c]
        cdef bint last = k == p.npos - 1
        cdef i64 i, start
        start = s.first_gt(after)
        for i in range(start, s.n):
            if s.ts[i] > self._ts:
                break
            if s.ts[i] == self._ts and not (last and i == self._last_local):
                continue
            env.klen[c] = m
            env.row[c] = i
            if p.iterf[c] >= 0 and not _holds(p, p.iterf[c], env):
                continue
            env.klist[c][m] = i
            env.klen[c] = m + 1
            env.row[c] = i
            if last:
                if i == self._last_local:
                    if _checks(p, k, env):
                        self._finish(p, part, env)
                    break
            else:
                if _checks(p, k, env):
                    self._dfs(p, part, env, k + 1, s.ts[i])
            self._kleene(p, part, env, k, m + 1, s.ts[i])
        return 0

    # -- completion, negation, output -----------------------------------------

    cdef int _finish(self, PlanRT p, Part part, Env* env) except -1:
        cdef int c, j, kprev, knext
        cdef Stack s, ns
        cdef i64 lo, hi, first_ts, last_ts, i
        cdef int cf = p.pos[0], cl = p.pos[p.npos - 1]
        s = part.stacks[cf]
        first_ts = s.ts[env.klist[cf][0]] if p.kleene[cf] else s.ts[env.row[cf]]
        s = part.stacks[cl]
        last_ts = s.ts[env.row[cl]]
        for c in range(p.ncomp):
            if not p.negated[c] or p.nextpos[c] < 0:
                continue
            kprev = p.prevpos[c]
            knext = p.nextpos[c]
            if kprev >= 0:
                j = p.pos[kprev]
                lo = (<Stack> part.stacks[j]).ts[env.row[j]]
            else:
                lo = last_ts - p.within
            j = p.pos[knext]
            s = part.stacks[j]
            hi = s.ts[env.klist[j][0]] if p.kleene[j] else s.ts[env.row[j]]
            ns = part.stacks[c]
            env.vals[c] = ns.vals
            env.kinds[c] = ns.kinds
            env.width[c] = ns.width
            for i in range(ns.first_gt(lo), ns.n):
                if ns.ts[i] >= hi:
                    break
                env.row[c] = i
                if p.strategy == 2 and not self._neg_equiv(p, part, env, c, ns.vals + i * ns.width,
                                                           ns.kinds + i * ns.width):
                    continue
                if _negchecks(p, c, env):
                    return 0
        derived = self._derive(p, part, env, first_ts, last_ts)
        if p.has_end_neg:
            self._part_pending(part, p, env, first_ts + p.within, derived)
        else:
            self._out.append(derived)
        return 0

    cdef bint _neg_equiv(self, PlanRT p, Part part, Env* env, int c, double* v, u8* k) except -1:
        cdef int cf = p.pos[0]
        cdef Stack s = part.stacks[cf]
        cdef i64 r = env.klist[cf][0] if p.kleene[cf] else env.row[cf]
        if p.neq == 0:
            return True
        return _eq_vals(v, k, s.vals + r * s.width, s.kinds + r * s.width, p, c, cf)

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
        self._waiting[p.slot].add(part)

    cdef object _derive(self, PlanRT p, Part part, Env* env, i64 first_ts, i64 last_ts):
        cdef int k, c, j
        cdef Stack s
        cdef double v = 0
        cdef u8 kd
        fields = {}
        for name, prog in p.outputs:
            kd = _eval(p, prog, env, &v)
            fields[name] = _pyvalue(kd, v, self._pool)
        seqs = []
        for k in range(p.npos):
            c = p.pos[k]
            s = part.stacks[c]
            if p.kleene[c]:
                for j in range(env.klen[c]):
                    seqs.append(s.seq[env.klist[c][j]])
            else:
                seqs.append(s.seq[env.row[c]])
        out = p.cp.plan.output
        return DerivedEvent(
            plan_id=p.plan_id,
            event_type=out.event_type if out is not None else p.plan_id,
            partition=self._partition,
            start_ts=first_ts,
            end_ts=last_ts,
            fields=fields,
            event_seqs=tuple(seqs),
        )

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
                env.row[c] = lst[n - 1] - s.base
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
                if p.strategy == 2 and not self._neg_equiv(p, part, &env, c, p.scratch[c],
                                                           p.scratch_k[c]):
                    continue
                if _negchecks(p, c, &env):
                    killed = True
                    break
        finally:
            for c in range(MAXC):
                free(bufs[c])
        return killed

    # -- skip till next match / strict contiguity: runs ------------------------

    cdef i64 _run_first_ts(self, Part part, PlanRT p, list run):
        cdef Stack s = part.stacks[p.pos[0]]
        return s.ts[<i64> run[0][0] - s.base]

    cdef i64 _row_for(self, PlanRT p, Part part, int c, list pushed) except -2:
        """Absolute row id of the current event in component c's stack
        (pushed once per event, on demand)."""
        cdef Stack s
        cdef i64 r = pushed[c]
        if r < 0:
            s = part.stacks[c]
            r = s.push(self._ts, self._seq, p.scratch[c], p.scratch_k[c]) + s.base
            pushed[c] = r
        return r

    cdef int _load_run(self, PlanRT p, Part part, list run, Env* env, i64** bufs) except -1:
        cdef int k, c, j, n
        cdef Stack s
        for k in range(p.ncomp):
            s = part.stacks[k]
            env.vals[k] = s.vals
            env.kinds[k] = s.kinds
            env.width[k] = s.width
            env.klen[k] = 0
            env.klist[k] = NULL
        for k in range(len(run)):
            c = p.pos[k]
            s = part.stacks[c]
            lst = run[k]
            n = len(lst)
            env.row[c] = <i64> lst[n - 1] - s.base
            env.klen[c] = n
            if p.kleene[c]:
                free(bufs[c])
                bufs[c] = <i64*> malloc((n + 2) * sizeof(i64))
                for j in range(n):
                    bufs[c][j] = <i64> lst[j] - s.base
                env.klist[c] = bufs[c]
        return 0

    cdef bint _can_take(self, PlanRT p, Part part, list run, int k, bint extend, long mask,
                        Env* env, i64 local_row) except -1:
        """Checks for binding the current event (already in stack of
        component pos[k], at local_row) to positive position k: as a new
        component (extend=False) or as one more Kleene element."""
        cdef int c = p.pos[k], cf = p.pos[0]
        cdef Stack s = part.stacks[c], sf = part.stacks[cf]
        cdef i64 fr
        if not (mask & (1 << c)):
            return False
        if p.within >= 0 and run and self._ts - self._run_first_ts(part, p, run) >= p.within:
            return False
        if p.strategy == 2 and p.neq > 0 and run:
            fr = <i64> run[0][0] - sf.base
            if not _eq_vals(s.vals + local_row * s.width, s.kinds + local_row * s.width,
                            sf.vals + fr * sf.width, sf.kinds + fr * sf.width, p, c, cf):
                return False
        if p.strategy == 2 and p.neq > 0 and not run:
            if not _eq_vals(s.vals + local_row * s.width, s.kinds + local_row * s.width,
                            s.vals + local_row * s.width, s.kinds + local_row * s.width, p, c, c):
                return False
        if p.kleene[c]:
            env.klen[c] = len(run[k]) if extend else 0
            env.row[c] = local_row
            if p.iterf[c] >= 0 and not _holds(p, p.iterf[c], env):
                return False
            if extend:
                return True
        # closing the previous Kleene component
        if k > 0 and p.kleene[p.pos[k - 1]] and not _checks(p, k - 1, env):
            return False
        if not p.kleene[c]:
            env.row[c] = local_row
            if not _checks(p, k, env):
                return False
        return True

    cdef _runs_step(self, PlanRT p, Part part, long mask):
        cdef bint strict = p.strategy == 2
        cdef int n = p.npos, m, k, c
        cdef Env env
        cdef i64* bufs[MAXC]
        cdef Stack s
        cdef i64 r, last_ts
        cdef list pushed = [-1] * p.ncomp
        cdef list kept = []
        cdef list run
        for c in range(MAXC):
            bufs[c] = NULL
        self._part = part
        try:
            for run in part.runs:
                m = len(run)
                c = p.pos[m - 1]
                s = part.stacks[c]
                last_ts = s.ts[<i64> run[m - 1][len(run[m - 1]) - 1] - s.base]
                new = None
                if self._ts > last_ts:
                    if m < n and (mask & (1 << p.pos[m])):
                        r = self._row_for(p, part, p.pos[m], pushed)
                        self._load_run(p, part, run, &env, bufs)
                        if self._can_take(p, part, run, m, False, mask, &env,
                                          r - (<Stack> part.stacks[p.pos[m]]).base):
                            new = [list(x) for x in run] + [[r]]
                    if new is None and p.kleene[c] and (mask & (1 << c)):
                        r = self._row_for(p, part, c, pushed)
                        self._load_run(p, part, run, &env, bufs)
                        if self._can_take(p, part, run, m - 1, True, mask, &env,
                                          r - s.base):
                            new = [list(x) for x in run[:m - 1]] + [run[m - 1] + [r]]
                if new is None:
                    if not strict:
                        kept.append(run)
                    continue
                if len(new) == n:
                    self._complete(p, part, new, &env, bufs)
                if len(new) < n or p.kleene[p.pos[n - 1]]:
                    kept.append(new)
            c = p.pos[0]
            if mask & (1 << c):
                r = self._row_for(p, part, c, pushed)
                self._load_run(p, part, [], &env, bufs)
                if self._can_take(p, part, [], 0, False, mask, &env,
                                  r - (<Stack> part.stacks[c]).base):
                    start = [[r]]
                    if n == 1:
                        self._complete(p, part, start, &env, bufs)
                    if n > 1 or p.kleene[c]:
                        kept.append(start)
        finally:
            for c in range(MAXC):
                free(bufs[c])
        part.runs = kept or ()

    cdef _complete(self, PlanRT p, Part part, list run, Env* env, i64** bufs):
        cdef int cl = p.pos[p.npos - 1]
        self._load_run(p, part, run, env, bufs)
        if p.kleene[cl] and not _checks(p, p.npos - 1, env):
            return
        self._finish(p, part, env)


def _event_data(ev):
    return {"plan_id": ev.plan_id, "event_type": ev.event_type, "partition": ev.partition,
            "start_ts": ev.start_ts, "end_ts": ev.end_ts, "fields": dict(ev.fields),
            "event_seqs": list(ev.event_seqs)}


def _event_from(d):
    return DerivedEvent(d["plan_id"], d["event_type"], d["partition"], d["start_ts"],
                        d["end_ts"], dict(d["fields"]), tuple(d["event_seqs"]))
