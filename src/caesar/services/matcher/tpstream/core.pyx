# cython: language_level=3
"""TPStream's deriver and matcher components (Körber et al., EDBT 2018,
section 5) for one temporal plan, per stream partition.

Deriver (section 5.1, Algorithm 1, over instants): `feed` walks a batch's
events in order; the events of one timestamp of a partition form an instant,
finalised when the partition's next instant starts or the batch ends. A
situation's run starts at an instant where every event of its source type
satisfies the condition, takes in the instant's aggregates, and ends (te) at
the first instant where one does not. Duration bounds decide when a run is
certain to be a situation ("visible"): without bounds at its start, with a
minimum once t + 1 - ts >= min, with a maximum only at its end (5.3.2).

Matcher (sections 5.2-5.3): each change at instant t (a situation became
visible, or ended) triggers a join that binds the changed situation first
and the others in the order `orders[trigger]` (section 5.4), drawing
candidates from each symbol's buffer of ended situations (a ts/te index
range found by binary search, as in Figure 3) and its one running situation.
A configuration is emitted when its match is certain at t and was not at the
partition's previous instant -- so exactly once, at its earliest detection
time. Certainty treats unknown ends as later than every known timestamp and
unordered among themselves; a constraint holding a whole prefix group is
thereby certain at the second endpoint (Table 2). Several changes at one
instant are deduplicated by binding earlier triggers only as triggers.

The semantics are in src/caesar/plans/temporal.py; the 2-phase reference
(reference.py) is the oracle of the property tests.
"""

cimport cython
from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int64_t, uint8_t

import numpy as np

cdef int64_t NONE = INT64_MIN
cdef int64_t OPEN = 4611686018427387904  # 2**62: an unknown end
cdef int64_t MAXV = INT64_MAX  # no upper bound

# Allen relation bits (plans/temporal.py ALLEN order)
DEF R_BEFORE = 0
DEF R_MEETS = 1
DEF R_OVERLAPS = 2
DEF R_STARTS = 3
DEF R_DURING = 4
DEF R_FINISHES = 5
DEF R_EQUALS = 6
DEF R_AFTER = 7
DEF R_MET_BY = 8
DEF R_OVERLAPPED_BY = 9
DEF R_STARTED_BY = 10
DEF R_CONTAINS = 11
DEF R_FINISHED_BY = 12

# aggregate function codes (compile.AGG_CODES)
DEF A_COUNT = 0
DEF A_SUM = 1
DEF A_AVG = 2
DEF A_MIN = 3
DEF A_MAX = 4
DEF A_FIRST = 5
DEF A_LAST = 6

DEF MAXS = 16


cdef inline int allen(int64_t a_ts, int64_t a_te, int64_t b_ts, int64_t b_te) noexcept nogil:
    if a_te < b_ts:
        return R_BEFORE
    if a_te == b_ts:
        return R_MEETS
    if b_te < a_ts:
        return R_AFTER
    if b_te == a_ts:
        return R_MET_BY
    if a_ts == b_ts:
        if a_te == b_te:
            return R_EQUALS
        return R_STARTS if a_te < b_te else R_STARTED_BY
    if a_ts < b_ts:
        if a_te < b_te:
            return R_OVERLAPS
        return R_FINISHED_BY if a_te == b_te else R_CONTAINS
    if a_te < b_te:
        return R_DURING
    return R_FINISHES if a_te == b_te else R_OVERLAPPED_BY


cdef inline bint certain(int mask, int64_t a_ts, int64_t a_te, int64_t b_ts,
                         int64_t b_te) noexcept nogil:
    """One of `mask`'s relations is certain; an end of NONE is unknown."""
    if a_te != NONE and b_te != NONE:
        return (mask >> allen(a_ts, a_te, b_ts, b_te)) & 1
    if a_te != NONE:
        return (mask >> allen(a_ts, a_te, b_ts, OPEN)) & 1
    if b_te != NONE:
        return (mask >> allen(a_ts, OPEN, b_ts, b_te)) & 1
    return ((mask >> allen(a_ts, OPEN, b_ts, OPEN - 1)) & 1
            and (mask >> allen(a_ts, OPEN, b_ts, OPEN)) & 1
            and (mask >> allen(a_ts, OPEN, b_ts, OPEN + 1)) & 1)


cdef inline void bounds(int rel, int64_t xts, int64_t xte, int64_t* r) noexcept nogil:
    """Ranges [ts_lo, ts_hi, te_lo, te_hi] a closed y must fall in for x rel y."""
    cdef int64_t lo = NONE, hi = MAXV, elo = NONE, ehi = MAXV
    if rel == R_BEFORE:
        lo = xte + 1
    elif rel == R_MEETS:
        lo = xte
        hi = xte
    elif rel == R_OVERLAPS:
        lo = xts + 1
        hi = xte - 1
        elo = xte + 1
    elif rel == R_STARTS:
        lo = xts
        hi = xts
        elo = xte + 1
    elif rel == R_DURING:
        hi = xts - 1
        elo = xte + 1
    elif rel == R_FINISHES:
        hi = xts - 1
        elo = xte
        ehi = xte
    elif rel == R_EQUALS:
        lo = xts
        hi = xts
        elo = xte
        ehi = xte
    elif rel == R_AFTER:
        ehi = xts - 1
    elif rel == R_MET_BY:
        elo = xts
        ehi = xts
    elif rel == R_OVERLAPPED_BY:
        hi = xts - 1
        elo = xts + 1
        ehi = xte - 1
    elif rel == R_STARTED_BY:
        lo = xts
        hi = xts
        elo = xts + 1
        ehi = xte - 1
    elif rel == R_CONTAINS:
        lo = xts + 1
        hi = xte - 1
        ehi = xte - 1
    elif rel == R_FINISHED_BY:
        lo = xts + 1
        hi = xte - 1
        elo = xte
        ehi = xte
    r[0] = lo
    r[1] = hi
    r[2] = elo
    r[3] = ehi


@cython.final
cdef class SitBuffer:
    """Ended situations of one symbol in one partition, ordered by ts (and
    so by te: situations of one definition are disjoint)."""

    cdef public object ts_a, te_a, vis_a, v_a, n_a, f_a
    cdef int64_t[::1] ts
    cdef int64_t[::1] te
    cdef int64_t[::1] vis
    cdef double[:, ::1] v
    cdef int64_t[:, ::1] n
    cdef uint8_t[:, ::1] f
    cdef public int head, end, cap, width

    def __init__(self, int width, int cap=8):
        self.width = width
        self.cap = cap
        self.head = 0
        self.end = 0
        self._alloc(cap)

    cdef void _alloc(self, int cap):
        self.ts_a = np.empty(cap, np.int64)
        self.te_a = np.empty(cap, np.int64)
        self.vis_a = np.empty(cap, np.int64)
        self.v_a = np.zeros((cap, max(self.width, 1)), np.float64)
        self.n_a = np.zeros((cap, max(self.width, 1)), np.int64)
        self.f_a = np.zeros((cap, max(self.width, 1)), np.uint8)
        self.ts = self.ts_a
        self.te = self.te_a
        self.vis = self.vis_a
        self.v = self.v_a
        self.n = self.n_a
        self.f = self.f_a

    cdef int push(self, int64_t ts, int64_t te, int64_t vis):
        """Append a row; returns its index (aggregates are filled by the caller)."""
        cdef int live = self.end - self.head
        if self.end == self.cap:
            if live * 2 <= self.cap:  # compact in place
                self.ts_a[:live] = self.ts_a[self.head:self.end]
                self.te_a[:live] = self.te_a[self.head:self.end]
                self.vis_a[:live] = self.vis_a[self.head:self.end]
                self.v_a[:live] = self.v_a[self.head:self.end]
                self.n_a[:live] = self.n_a[self.head:self.end]
                self.f_a[:live] = self.f_a[self.head:self.end]
            else:
                old = (self.ts_a, self.te_a, self.vis_a, self.v_a, self.n_a, self.f_a)
                self.cap *= 2
                self._alloc(self.cap)
                self.ts_a[:live] = old[0][self.head:self.end]
                self.te_a[:live] = old[1][self.head:self.end]
                self.vis_a[:live] = old[2][self.head:self.end]
                self.v_a[:live] = old[3][self.head:self.end]
                self.n_a[:live] = old[4][self.head:self.end]
                self.f_a[:live] = old[5][self.head:self.end]
            self.head = 0
            self.end = live
        self.ts[self.end] = ts
        self.te[self.end] = te
        self.vis[self.end] = vis
        self.end += 1
        return self.end - 1

    cdef void purge(self, int64_t limit) noexcept:
        """Drop situations with ts <= limit (they can join no later match)."""
        while self.head < self.end and self.ts[self.head] <= limit:
            self.head += 1
        if self.head == self.end:
            self.head = 0
            self.end = 0

    cdef int first_ts_ge(self, int64_t x) noexcept:
        cdef int lo = self.head, hi = self.end, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.ts[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        return lo

    cdef int first_ts_gt(self, int64_t x) noexcept:
        cdef int lo = self.head, hi = self.end, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.ts[mid] <= x:
                lo = mid + 1
            else:
                hi = mid
        return lo

    cdef int first_te_ge(self, int64_t x) noexcept:
        cdef int lo = self.head, hi = self.end, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.te[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        return lo

    cdef int first_te_gt(self, int64_t x) noexcept:
        cdef int lo = self.head, hi = self.end, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.te[mid] <= x:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def rows(self):
        """Live rows as plain data: [ts, te, vis, [v...], [n...], [f...]]."""
        return [[int(self.ts[i]), int(self.te[i]), int(self.vis[i]),
                 [float(x) for x in self.v_a[i, :self.width]],
                 [int(x) for x in self.n_a[i, :self.width]],
                 [int(x) for x in self.f_a[i, :self.width]]]
                for i in range(self.head, self.end)]

    def __len__(self):
        return self.end - self.head


@cython.final
cdef class PlanRunner:
    """Deriver + matcher state of one temporal plan across partitions."""

    cdef public int nsit, nagg, capacity
    cdef public int64_t within
    cdef public bint emit_end, matching
    cdef int64_t[::1] min_d
    cdef int64_t[::1] max_d
    cdef int[::1] agg_func
    cdef int[::1] agg_lo  # aggregates of situation i: agg_lo[i] .. agg_lo[i + 1]
    cdef int mask[MAXS][MAXS]
    cdef int order[MAXS][MAXS]
    # per slot
    cdef public object cur_a, pend_a, run_a, vis_a, dead_a, inst_a
    cdef public object accn_a, accv_a, accf_a, insn_a, insv_a, insf_a
    cdef int64_t[::1] cur_ts
    cdef uint8_t[::1] pending
    cdef int64_t[:, ::1] run_ts
    cdef int64_t[:, ::1] vis_at
    cdef uint8_t[:, ::1] dead
    cdef uint8_t[:, ::1] inst
    cdef int64_t[:, ::1] acc_n
    cdef double[:, ::1] acc_v
    cdef uint8_t[:, ::1] acc_f
    cdef int64_t[:, ::1] ins_n
    cdef double[:, ::1] ins_v
    cdef uint8_t[:, ::1] ins_f
    cdef public list buffers  # slot -> [SitBuffer per situation] | None
    cdef public dict slot_of
    cdef public list part_of
    cdef public list free
    cdef public list out
    # join scratch
    cdef int64_t b_ts[MAXS]
    cdef int64_t b_te[MAXS]
    cdef int64_t b_vis[MAXS]
    cdef int b_idx[MAXS]  # buffer row, -1 = the running situation
    cdef int trig_kind[MAXS]  # 0 none, 1 ended at t (last buffer row), 2 running
    cdef int trig_rank[MAXS]
    cdef int cur_rank
    cdef int cur_slot
    cdef int64_t cur_t
    # statistics for adaptive ordering (section 5.4.1)
    cdef public object checked_a, passed_a, probes_a, seen_a
    cdef int64_t[:, ::1] checked
    cdef int64_t[:, ::1] passed
    cdef int64_t[:, ::1] probes  # joins of j with x bound
    cdef int64_t[:, ::1] seen  # situations of j available at those joins
    cdef public int64_t joins, emitted
    # output layout (set_output): DERIVE fields that are plain aggregates
    cdef public list direct  # [(field name, aggregate index or -1: evaluated in Python)]
    cdef public list ts_names, te_names
    cdef public bint has_exprs
    cdef public object strings  # StringPool of the current batch
    cdef int[::1] agg_kind

    def __init__(self, int nsit, list min_d, list max_d, list agg_sit, list agg_func,
                 list mask, list orders, int64_t within, bint emit_end, int capacity=64):
        cdef int i, j
        if nsit > MAXS:
            raise ValueError("too many situations")
        self.nsit = nsit
        self.nagg = len(agg_func)
        self.within = within
        self.emit_end = emit_end
        self.matching = nsit > 1
        self.min_d = np.array(min_d, np.int64)
        self.max_d = np.array(max_d, np.int64)
        self.agg_func = np.array(agg_func, np.int32)
        lo = np.zeros(nsit + 1, np.int32)
        for i in range(nsit):
            lo[i + 1] = lo[i] + sum(1 for s in agg_sit if s == i)
        if list(agg_sit) != sorted(agg_sit):
            raise ValueError("aggregates must be sorted by situation")
        self.agg_lo = lo
        for i in range(nsit):
            for j in range(nsit):
                self.mask[i][j] = mask[i][j]
                self.order[i][j] = orders[i][j]
        self.buffers = []
        self.slot_of = {}
        self.part_of = []
        self.free = []
        self.out = []
        self.capacity = 0
        self._grow(capacity)
        self.checked_a = np.zeros((nsit, nsit), np.int64)
        self.passed_a = np.zeros((nsit, nsit), np.int64)
        self.checked = self.checked_a
        self.passed = self.passed_a
        self.probes_a = np.zeros((nsit, nsit), np.int64)
        self.seen_a = np.zeros((nsit, nsit), np.int64)
        self.probes = self.probes_a
        self.seen = self.seen_a
        self.joins = 0
        self.emitted = 0
        self.direct = []
        self.ts_names = [f"s{i}_ts" for i in range(nsit)]
        self.te_names = [f"s{i}_te" for i in range(nsit)]
        self.has_exprs = False
        self.strings = None
        self.agg_kind = np.zeros(max(self.nagg, 1), np.int32)

    def set_output(self, list names, list direct, list kinds, bint has_exprs):
        """Field layout: situation names, [(field, aggregate index | -1)],
        aggregate value kinds (0 int, 1 float, 2 bool, 3 string)."""
        self.ts_names = [f"{n}_ts" for n in names]
        self.te_names = [f"{n}_te" for n in names]
        self.direct = direct
        self.has_exprs = has_exprs
        self.agg_kind = np.array(kinds + [0], np.int32)

    def set_order(self, int trigger, list order):
        cdef int j
        for j in range(self.nsit):
            self.order[trigger][j] = order[j]

    def get_order(self, int trigger):
        return [self.order[trigger][j] for j in range(self.nsit)]

    cdef void _grow(self, int cap):
        cdef int old = self.capacity
        na = max(self.nagg, 1)
        ns = self.nsit

        def grown(a, shape, dtype, fill):
            b = np.full(shape, fill, dtype)
            if a is not None and old:
                b[:old] = a[:old]
            return b

        self.cur_a = grown(self.cur_a, cap, np.int64, NONE)
        self.pend_a = grown(self.pend_a, cap, np.uint8, 0)
        self.run_a = grown(self.run_a, (cap, ns), np.int64, NONE)
        self.vis_a = grown(self.vis_a, (cap, ns), np.int64, NONE)
        self.dead_a = grown(self.dead_a, (cap, ns), np.uint8, 0)
        self.inst_a = grown(self.inst_a, (cap, ns), np.uint8, 0)
        self.accn_a = grown(self.accn_a, (cap, na), np.int64, 0)
        self.accv_a = grown(self.accv_a, (cap, na), np.float64, 0)
        self.accf_a = grown(self.accf_a, (cap, na), np.uint8, 0)
        self.insn_a = grown(self.insn_a, (cap, na), np.int64, 0)
        self.insv_a = grown(self.insv_a, (cap, na), np.float64, 0)
        self.insf_a = grown(self.insf_a, (cap, na), np.uint8, 0)
        self.cur_ts = self.cur_a
        self.pending = self.pend_a
        self.run_ts = self.run_a
        self.vis_at = self.vis_a
        self.dead = self.dead_a
        self.inst = self.inst_a
        self.acc_n = self.accn_a
        self.acc_v = self.accv_a
        self.acc_f = self.accf_a
        self.ins_n = self.insn_a
        self.ins_v = self.insv_a
        self.ins_f = self.insf_a
        self.buffers.extend([None] * (cap - old))
        self.part_of.extend([None] * (cap - old))
        self.capacity = cap

    # ------------------------------------------------------------ slots
    cpdef int slot(self, object partition):
        """The state slot of a partition (allocated on first sight)."""
        found = self.slot_of.get(partition)
        if found is not None:
            return found
        cdef int s
        if self.free:
            s = self.free.pop()
        else:
            s = len(self.slot_of)
            if s >= self.capacity:
                self._grow(self.capacity * 2)
        self._reset(s)
        self.slot_of[partition] = s
        self.part_of[s] = partition
        if self.matching:
            self.buffers[s] = [SitBuffer(self.agg_lo[i + 1] - self.agg_lo[i])
                               for i in range(self.nsit)]
        return s

    cdef void _reset(self, int s):
        cdef int i, k
        self.cur_ts[s] = NONE
        self.pending[s] = 0
        for i in range(self.nsit):
            self.run_ts[s, i] = NONE
            self.vis_at[s, i] = NONE
            self.dead[s, i] = 0
            self.inst[s, i] = 0
        for k in range(self.nagg):
            self.acc_n[s, k] = 0
            self.acc_v[s, k] = 0
            self.acc_f[s, k] = 0
            self.ins_n[s, k] = 0
            self.ins_v[s, k] = 0
            self.ins_f[s, k] = 0

    cdef void _forget(self, int s):
        """Drop runs and ended situations: all started before the window of
        any later match (plans/temporal.py: a silence of WITHIN)."""
        cdef int64_t t = self.cur_ts[s]
        cdef SitBuffer b
        self._reset(s)
        self.cur_ts[s] = t
        if self.buffers[s] is not None:
            for b in self.buffers[s]:
                b.head = 0
                b.end = 0

    def stale(self, int64_t watermark):
        """Partitions silent for a whole window before `watermark` (to release)."""
        if self.within == NONE:
            return []
        return [p for p, s in self.slot_of.items()
                if not self.pending[s] and self.cur_ts[s] != NONE
                and watermark - self.cur_ts[s] >= self.within]

    def release(self, partition):
        """Forget a partition (its context window ended, or it holds nothing)."""
        s = self.slot_of.pop(partition, None)
        if s is None:
            return
        self._reset(s)
        self.buffers[s] = None
        self.part_of[s] = None
        self.free.append(s)

    def idle(self, partition):
        """True when the partition holds no running situation and no buffered one."""
        cdef int s = self.slot_of[partition]
        cdef int i
        if self.pending[s]:
            return False
        for i in range(self.nsit):
            if self.run_ts[s, i] != NONE:
                return False
        bufs = self.buffers[s]
        if bufs is not None:
            for b in bufs:
                if len(b):
                    return False
        return True

    def purge(self, int64_t watermark):
        """No instant before `watermark` follows: drop what WITHIN has passed."""
        cdef SitBuffer b
        if not self.matching or self.within == NONE:
            return
        for s in self.slot_of.values():
            for b in self.buffers[s]:
                b.purge(watermark - self.within)

    def buffered(self):
        """Number of ended situations held (all partitions), for memory tests."""
        total = 0
        for s in self.slot_of.values():
            if self.buffers[s] is not None:
                total += sum(len(b) for b in self.buffers[s])
        return total

    # ------------------------------------------------------------ deriver
    @cython.boundscheck(False)
    def feed(self, const int64_t[::1] ts, const int64_t[::1] slots, const int8_t[::1] etype,
             const int64_t[::1] type_sits, const uint8_t[:, ::1] cond,
             const double[:, ::1] aval, const uint8_t[:, ::1] aknown):
        """Events in arrival order (ts ascending per partition): slot, type
        index (its bit mask of situations in type_sits), whether each
        situation's condition holds, each aggregate's argument."""
        cdef Py_ssize_t e, n = ts.shape[0]
        cdef int s, i, k, fn
        cdef int64_t t, m
        cdef double v
        cdef uint8_t kn
        touched = np.empty(n, np.int64)
        cdef int64_t[::1] touch = touched
        cdef Py_ssize_t nt = 0
        for e in range(n):
            s = <int>slots[e]
            t = ts[e]
            if self.cur_ts[s] != t or not self.pending[s]:
                if self.pending[s]:
                    if t < self.cur_ts[s]:
                        raise ValueError(f"events out of order in a partition: {t} after "
                                         f"{self.cur_ts[s]}")
                    self._finalize(s)
                elif self.cur_ts[s] != NONE and t <= self.cur_ts[s]:
                    raise ValueError(f"instant {t} of a partition split across batches or out "
                                     f"of order (last instant {self.cur_ts[s]})")
                if self.within != NONE and self.cur_ts[s] != NONE and \
                        t - self.cur_ts[s] >= self.within:
                    self._forget(s)  # silent for a whole window: start afresh
                self.cur_ts[s] = t
                self.pending[s] = 1
                touch[nt] = s
                nt += 1
            m = type_sits[etype[e]]
            for i in range(self.nsit):
                if not (m >> i) & 1:
                    continue
                if cond[e, i]:
                    if self.inst[s, i] == 0:
                        self.inst[s, i] = 1
                else:
                    self.inst[s, i] = 2
                for k in range(self.agg_lo[i], self.agg_lo[i + 1]):
                    fn = self.agg_func[k]
                    v = aval[e, k]
                    kn = aknown[e, k]
                    if fn == A_COUNT:
                        self.ins_n[s, k] += kn
                    elif fn == A_SUM or fn == A_AVG:
                        if kn:
                            self.ins_v[s, k] += v
                            self.ins_n[s, k] += 1
                    elif fn == A_MIN:
                        if kn:
                            if self.ins_n[s, k] == 0 or v < self.ins_v[s, k]:
                                self.ins_v[s, k] = v
                            self.ins_n[s, k] += 1
                    elif fn == A_MAX:
                        if kn:
                            if self.ins_n[s, k] == 0 or v > self.ins_v[s, k]:
                                self.ins_v[s, k] = v
                            self.ins_n[s, k] += 1
                    elif fn == A_FIRST:
                        if self.ins_n[s, k] == 0:
                            self.ins_v[s, k] = v
                            self.ins_f[s, k] = kn
                        self.ins_n[s, k] += 1
                    else:  # A_LAST
                        self.ins_v[s, k] = v
                        self.ins_f[s, k] = kn
                        self.ins_n[s, k] += 1
        for e in range(nt):
            s = <int>touch[e]
            if self.pending[s]:
                self._finalize(s)

    cdef void _merge(self, int s, int i) noexcept:
        cdef int k, fn
        for k in range(self.agg_lo[i], self.agg_lo[i + 1]):
            fn = self.agg_func[k]
            if fn == A_COUNT or fn == A_SUM or fn == A_AVG:
                self.acc_v[s, k] += self.ins_v[s, k]
            elif fn == A_MIN:
                if self.ins_n[s, k] and (self.acc_n[s, k] == 0 or
                                         self.ins_v[s, k] < self.acc_v[s, k]):
                    self.acc_v[s, k] = self.ins_v[s, k]
            elif fn == A_MAX:
                if self.ins_n[s, k] and (self.acc_n[s, k] == 0 or
                                         self.ins_v[s, k] > self.acc_v[s, k]):
                    self.acc_v[s, k] = self.ins_v[s, k]
            elif fn == A_FIRST:
                if self.acc_n[s, k] == 0 and self.ins_n[s, k]:
                    self.acc_v[s, k] = self.ins_v[s, k]
                    self.acc_f[s, k] = self.ins_f[s, k]
            else:
                if self.ins_n[s, k]:
                    self.acc_v[s, k] = self.ins_v[s, k]
                    self.acc_f[s, k] = self.ins_f[s, k]
            self.acc_n[s, k] += self.ins_n[s, k]

    cdef void _start(self, int s, int i) noexcept:
        cdef int k
        for k in range(self.agg_lo[i], self.agg_lo[i + 1]):
            self.acc_n[s, k] = self.ins_n[s, k]
            self.acc_v[s, k] = self.ins_v[s, k]
            self.acc_f[s, k] = self.ins_f[s, k]

    cdef void _finalize(self, int s):
        """The instant cur_ts[s] is complete: update runs, then match."""
        cdef int i, k, row
        cdef int64_t t = self.cur_ts[s]
        cdef int64_t dur, rts, vis
        cdef uint8_t st
        cdef bint changed = False
        cdef SitBuffer b
        self.pending[s] = 0
        for i in range(self.nsit):
            self.trig_kind[i] = 0
            st = self.inst[s, i]
            if st == 1:
                if self.run_ts[s, i] == NONE:
                    self.run_ts[s, i] = t
                    self.vis_at[s, i] = NONE
                    self.dead[s, i] = 0
                    self._start(s, i)
                elif not self.dead[s, i]:
                    self._merge(s, i)
            elif st == 2 and self.run_ts[s, i] != NONE:
                rts = self.run_ts[s, i]
                if not self.dead[s, i]:
                    dur = t - rts
                    if (self.min_d[i] == NONE or dur >= self.min_d[i]) and \
                            (self.max_d[i] == NONE or dur <= self.max_d[i]):
                        vis = self.vis_at[s, i] if self.vis_at[s, i] != NONE else t
                        self._ended(s, i, rts, t, vis)
                        changed = True
                self.run_ts[s, i] = NONE
                self.vis_at[s, i] = NONE
                self.dead[s, i] = 0
            if st:
                self.inst[s, i] = 0
                for k in range(self.agg_lo[i], self.agg_lo[i + 1]):
                    self.ins_n[s, k] = 0
                    self.ins_v[s, k] = 0
                    self.ins_f[s, k] = 0
            rts = self.run_ts[s, i]
            if rts != NONE and not self.dead[s, i]:
                if self.max_d[i] != NONE:
                    if t + 1 - rts > self.max_d[i]:
                        self.dead[s, i] = 1  # too long: never a situation
                elif self.vis_at[s, i] == NONE and \
                        (self.min_d[i] == NONE or t + 1 - rts >= self.min_d[i]):
                    self.vis_at[s, i] = t
                    self.trig_kind[i] = 2
                    changed = True
        if not changed:
            return
        if not self.matching:
            if not self.emit_end:
                for i in range(self.nsit):
                    if self.trig_kind[i]:
                        self._single(s, i, t)
            return
        if self.within != NONE:
            for i in range(self.nsit):
                b = self.buffers[s][i]
                b.purge(t - self.within)
                if self.trig_kind[i] == 1 and b.end == b.head:
                    self.trig_kind[i] = 0  # ended before the window: joins nothing
        self._match(s, t)

    cdef void _ended(self, int s, int i, int64_t ts, int64_t te, int64_t vis):
        cdef SitBuffer b
        cdef int row, k, c
        if not self.matching:
            if self.emit_end:
                self._emit_single(s, i, ts, te, te)
            elif vis == te:
                self.trig_kind[i] = 1
                self.b_ts[i] = ts
                self.b_te[i] = te
            return
        b = self.buffers[s][i]
        row = b.push(ts, te, vis)
        c = 0
        for k in range(self.agg_lo[i], self.agg_lo[i + 1]):
            b.v[row, c] = self.acc_v[s, k]
            b.n[row, c] = self.acc_n[s, k]
            b.f[row, c] = self.acc_f[s, k]
            c += 1
        self.trig_kind[i] = 1

    cdef void _single(self, int s, int i, int64_t t):
        """One-situation pattern: a match when the situation becomes certain."""
        cdef int64_t ts, te
        if self.trig_kind[i] == 1:
            ts = self.b_ts[i]
            te = self.b_te[i]
        else:
            ts = self.run_ts[s, i]
            te = NONE
        if self.within != NONE and t - ts >= self.within:
            return
        self._emit_single(s, i, ts, te, t)

    cdef void _emit_single(self, int s, int i, int64_t ts, int64_t te, int64_t td):
        cdef int k
        values = []
        for k in range(self.agg_lo[i], self.agg_lo[i + 1]):
            values.append(_value(self.agg_func[k], self.acc_n[s, k], self.acc_v[s, k],
                                 self.acc_f[s, k]))
        self.b_ts[i] = ts
        self.b_te[i] = te
        self._output(s, td, ts, values)

    cdef void _output(self, int s, int64_t td, int64_t start, list values):
        """One match as (partition, t_d, earliest start, fields, values): the
        DERIVE fields that are plain aggregates and the member intervals are
        filled in here; `values` (the aggregates) is kept only when a field
        needs evaluating in Python (None otherwise)."""
        cdef int i, k
        cdef dict fields = {}
        for name, k in self.direct:
            fields[name] = None if k < 0 else _convert(self.agg_kind[k], values[k], self.strings)
        for i in range(self.nsit):
            fields[self.ts_names[i]] = self.b_ts[i]
            fields[self.te_names[i]] = None if self.b_te[i] == NONE else self.b_te[i]
        self.emitted += 1
        if self.has_exprs:
            typed = [_convert(self.agg_kind[k], values[k], self.strings)
                     for k in range(len(values))]
            self.out.append((self.part_of[s], td, start, fields, typed))
        else:
            self.out.append((self.part_of[s], td, start, fields, None))

    # ------------------------------------------------------------ matcher
    cdef void _match(self, int s, int64_t t):
        cdef int i, rank = 0
        for i in range(self.nsit):
            if self.trig_kind[i]:
                self.trig_rank[i] = rank
                rank += 1
        self.cur_slot = s
        self.cur_t = t
        for i in range(self.nsit):
            if not self.trig_kind[i]:
                continue
            self.cur_rank = self.trig_rank[i]
            self.joins += 1
            if self._bind_trigger(i):
                self._step(1, i)

    cdef bint _bind_trigger(self, int i):
        cdef SitBuffer b
        cdef int s = self.cur_slot
        if self.trig_kind[i] == 1:
            b = self.buffers[s][i]
            self.b_idx[i] = b.end - 1
            self.b_ts[i] = b.ts[b.end - 1]
            self.b_te[i] = b.te[b.end - 1]
            self.b_vis[i] = b.vis[b.end - 1]
        else:
            self.b_idx[i] = -1
            self.b_ts[i] = self.run_ts[s, i]
            self.b_te[i] = NONE
            self.b_vis[i] = self.vis_at[s, i]
        return self.within == NONE or self.cur_t - self.b_ts[i] < self.within

    cdef void _step(self, int step, int first):
        cdef int j, x, p, q, idx, lo_i, hi_i, rel, m
        cdef int64_t r[4]
        cdef int64_t ts_lo, ts_hi, te_lo, te_hi, lo1, hi1, elo1, ehi1, xte
        cdef int s = self.cur_slot
        cdef SitBuffer b
        cdef bint ok
        if step == self.nsit:
            self._complete()
            return
        j = self.order[first][step]
        b = self.buffers[s][j]
        # candidate ranges: intersection over the constraints to bound situations
        ts_lo = self.cur_t - self.within + 1 if self.within != NONE else NONE
        ts_hi = MAXV
        te_lo = NONE
        te_hi = MAXV
        for p in range(step):
            x = self.order[first][p]
            m = self.mask[x][j]
            if m == 0:
                continue
            self.probes[x, j] += 1
            self.seen[x, j] += b.end - b.head + (self.run_ts[s, j] != NONE)
            xte = self.b_te[x] if self.b_te[x] != NONE else OPEN
            lo1 = MAXV
            hi1 = NONE
            elo1 = MAXV
            ehi1 = NONE
            for rel in range(13):
                if (m >> rel) & 1:
                    bounds(rel, self.b_ts[x], xte, r)
                    if r[0] < lo1:
                        lo1 = r[0]
                    if r[1] > hi1:
                        hi1 = r[1]
                    if r[2] < elo1:
                        elo1 = r[2]
                    if r[3] > ehi1:
                        ehi1 = r[3]
            if lo1 > ts_lo:
                ts_lo = lo1
            if hi1 < ts_hi:
                ts_hi = hi1
            if elo1 > te_lo:
                te_lo = elo1
            if ehi1 < te_hi:
                te_hi = ehi1
        lo_i = b.first_ts_ge(ts_lo) if ts_lo != NONE else b.head
        hi_i = b.first_ts_gt(ts_hi) if ts_hi != MAXV else b.end
        if te_lo != NONE:
            idx = b.first_te_ge(te_lo)
            if idx > lo_i:
                lo_i = idx
        if te_hi != MAXV:
            idx = b.first_te_gt(te_hi)
            if idx < hi_i:
                hi_i = idx
        for idx in range(lo_i, hi_i):
            if self.trig_kind[j] == 1 and self.trig_rank[j] < self.cur_rank and idx == b.end - 1:
                continue  # bound as an earlier trigger already
            if self._fits(step, first, j, b.ts[idx], b.te[idx]):
                self.b_idx[j] = idx
                self.b_ts[j] = b.ts[idx]
                self.b_te[j] = b.te[idx]
                self.b_vis[j] = b.vis[idx]
                self._step(step + 1, first)
        # the running situation, if certain
        if self.run_ts[s, j] != NONE and self.vis_at[s, j] != NONE and not self.dead[s, j]:
            if self.trig_kind[j] == 2 and self.trig_rank[j] < self.cur_rank:
                return
            if self.within != NONE and self.cur_t - self.run_ts[s, j] >= self.within:
                return
            if self._fits(step, first, j, self.run_ts[s, j], NONE):
                self.b_idx[j] = -1
                self.b_ts[j] = self.run_ts[s, j]
                self.b_te[j] = NONE
                self.b_vis[j] = self.vis_at[s, j]
                self._step(step + 1, first)

    cdef bint _fits(self, int step, int first, int j, int64_t ts, int64_t te) noexcept:
        cdef int p, x, m
        for p in range(step):
            x = self.order[first][p]
            m = self.mask[x][j]
            if m == 0:
                continue
            self.checked[x, j] += 1
            if not certain(m, self.b_ts[x], self.b_te[x], ts, te):
                return False
            self.passed[x, j] += 1
        return True

    cdef void _complete(self):
        """A configuration certain at t: emit it unless it was certain before."""
        cdef int i, j
        cdef int64_t t = self.cur_t
        cdef int64_t te_i, te_j
        cdef bint new = False
        for i in range(self.nsit):
            if self.b_vis[i] == t:
                new = True
                break
        if not new:
            for i in range(self.nsit):
                for j in range(i + 1, self.nsit):
                    if self.mask[i][j] == 0:
                        continue
                    if self.b_te[i] != t and self.b_te[j] != t:
                        continue
                    te_i = NONE if self.b_te[i] == t else self.b_te[i]
                    te_j = NONE if self.b_te[j] == t else self.b_te[j]
                    if not certain(self.mask[i][j], self.b_ts[i], te_i, self.b_ts[j], te_j):
                        new = True
                        break
                if new:
                    break
        if new:
            self._emit()

    cdef void _emit(self):
        cdef int i, k, c, s = self.cur_slot
        cdef int64_t start = self.b_ts[0]
        cdef SitBuffer b
        values = []
        for i in range(self.nsit):
            if self.b_ts[i] < start:
                start = self.b_ts[i]
            if self.b_idx[i] < 0:
                for k in range(self.agg_lo[i], self.agg_lo[i + 1]):
                    values.append(_value(self.agg_func[k], self.acc_n[s, k], self.acc_v[s, k],
                                         self.acc_f[s, k]))
            else:
                b = self.buffers[s][i]
                c = 0
                for k in range(self.agg_lo[i], self.agg_lo[i + 1]):
                    values.append(_value(self.agg_func[k], b.n[self.b_idx[i], c],
                                         b.v[self.b_idx[i], c], b.f[self.b_idx[i], c]))
                    c += 1
        self._output(s, self.cur_t, start, values)

    # ------------------------------------------------------------ state
    def state(self, partition):
        """A partition's state as plain data (between batches: no open instant)."""
        s = self.slot_of.get(partition)
        if s is None:
            return None
        runs = []
        for i in range(self.nsit):
            lo, hi = self.agg_lo[i], self.agg_lo[i + 1]
            runs.append([int(self.run_ts[s, i]), int(self.vis_at[s, i]), int(self.dead[s, i]),
                         [float(x) for x in self.accv_a[s, lo:hi]],
                         [int(x) for x in self.accn_a[s, lo:hi]],
                         [int(x) for x in self.accf_a[s, lo:hi]]])
        bufs = None
        if self.buffers[s] is not None:
            bufs = [b.rows() for b in self.buffers[s]]
        return {"cur_ts": int(self.cur_ts[s]), "runs": runs, "buffers": bufs}

    def load(self, partition, dict state):
        cdef SitBuffer b
        cdef int s, i, row, c
        self.release(partition)
        s = self.slot(partition)
        self.cur_ts[s] = state["cur_ts"]
        for i, run in enumerate(state["runs"]):
            self.run_ts[s, i] = run[0]
            self.vis_at[s, i] = run[1]
            self.dead[s, i] = run[2]
            lo = self.agg_lo[i]
            for c in range(len(run[3])):
                self.acc_v[s, lo + c] = run[3][c]
                self.acc_n[s, lo + c] = run[4][c]
                self.acc_f[s, lo + c] = run[5][c]
        if state["buffers"] is not None and self.matching:
            for i, rows in enumerate(state["buffers"]):
                b = self.buffers[s][i]
                for r in rows:
                    row = b.push(r[0], r[1], r[2])
                    for c in range(len(r[3])):
                        b.v[row, c] = r[3][c]
                        b.n[row, c] = r[4][c]
                        b.f[row, c] = r[5][c]


cdef object _convert(int kind, object v, object strings):
    if v is None:
        return None
    if kind == 0:
        return int(v)
    if kind == 1:
        return float(v)
    if kind == 2:
        return bool(v)
    return strings.string(int(v))


cdef object _value(int fn, int64_t n, double v, uint8_t f):
    """An accumulator's aggregate (None = missing), Cayuga FOLD semantics."""
    if fn == A_COUNT:
        return n
    if n == 0:
        return None
    if fn == A_AVG:
        return v / n
    if fn == A_FIRST or fn == A_LAST:
        return v if f else None
    return v
