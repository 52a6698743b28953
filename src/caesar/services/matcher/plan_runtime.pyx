# cython: language_level=3
"""A compiled plan (compile.py's CompiledPlan) as flat C arrays for the
engine's hot loops: component flags, positive order, per-level checks, the
VM's instruction and constant tables. Immutable once built; shared by every
partition and key of the plan."""

import numpy as np

from libc.stdlib cimport free, malloc

from caesar.errors import PlanError

from caesar.services.matcher.typedefs cimport MAXC, MAXSTACK, NO_TS, OP_LOAD, Cell


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
        self.alt = cp.alt
        self.keyless = 1 if cp.keyless else 0
        self.eq_neg = 1 if cp.plan.equivalence_negated else 0
        self.skip = cp.skip
        self.skip_pos = cp.skip_pos
        self.has_timeout = 1 if cp.plan.timeout is not None else 0
        self.timeout_outputs = list(cp.timeout_outputs)
        self.has_optional = 0
        self.dead = 1 if cp.dead else 0
        self.solo = 0
        self.nrun = len(cp.equal_run)
        for i, c in enumerate(cp.equal_run):
            self.runcol[i] = c
        self.needs_part = 0
        self.startmask = 0
        self.last_stack = None
        self.last_sweep = NO_TS
        if self.neq > 8:
            raise PlanError(f"plan {self.plan_id}: more than 8 equivalence attributes")
        self.code = cp.code
        self.const_cells = cp.const_vals.copy()
        self.cvals = <Cell*> &self.const_cells[0]
        self.ckinds = cp.const_kinds.copy()
        self.overflows = 0
        self.functions = list(cp.functions)
        self.failures = []
        self.pool = None
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
            self.minc[i] = comp.min_count
            self.maxc[i] = comp.max_count
            self.greedy[i] = 1 if comp.greedy else 0
            self.killneg[i] = 1 if comp.kills_waiting else 0
            self.filtered[i] = 1 if comp.filters else 0
            self.neggate[i] = comp.gate
            if comp.kleene and comp.min_count == 0:
                self.has_optional = 1
            for j in range(self.neq):
                self.eqcol[i][j] = comp.equiv_cols[j]
            starts.append(len(ids))
            ns.append(len(comp.neg_checks))
            ids.extend(comp.neg_checks)
            self.scratch[i] = <Cell*> malloc((self.width[i] + 1) * sizeof(Cell))
            self.scratch_k[i] = <u8*> malloc((self.width[i] + 1) * sizeof(u8))
        self.negchk_ids, self.negchk_start, self.negchk_n = _ints(ids), _ints(starts), _ints(ns)
        self.nkill = sum(1 for comp in cp.comps if comp.kills_waiting)
        j = -1
        for i in range(self.npos):
            self.gate[i] = j
            if self.minc[self.pos[i]] > 0:
                j = i
        self.outputs = list(cp.outputs)
        self.out_progs = _ints([prog for _name, prog in self.outputs])
        loads = [(cp.code[cp.prog_start[prog], 1], cp.code[cp.prog_start[prog], 2])
                 if cp.prog_len[prog] == 1 and cp.code[cp.prog_start[prog], 0] == OP_LOAD
                 else (-1, -1) for _name, prog in self.outputs]
        self.out_comp = _ints([a for a, _col in loads])
        self.out_col = _ints([col for _a, col in loads])
        out = cp.plan.output
        self.output_type = out.event_type if out is not None else self.plan_id
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
        self.pool = pool
        for idx, text in self.cp.const_strings:
            self.const_cells[idx] = pool.code(text)
