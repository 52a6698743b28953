# C-level contract of plan_runtime.pyx: a compiled plan as flat C arrays,
# immutable once built (shared by every partition and key).
from caesar.services.matcher.typedefs cimport MAXC, Cell, i64, u8


cdef class PlanRT:
    cdef public object cp
    cdef public str plan_id
    cdef public int slot
    cdef public int strategy
    cdef public i64 within
    cdef public int ncomp, npos, has_end_neg, neq
    cdef public int alt       # alternative (AND/OR) of the plan it belongs to
    cdef public int keyless   # one Part per partition, equivalence checked while matching
    cdef public int eq_neg    # [attr] compares negated events too
    cdef public int skip, skip_pos, has_timeout, has_optional, dead
    # one positive component, no key, window-free state: a match per passing
    # event, made without a Part (set by the engine: not with prefix sharing)
    cdef public int solo
    # an equal run (compile.equal_run): how many columns must be equal from
    # one event of a key to the next (0: not one), and which
    cdef public int nrun
    cdef int runcol[8]
    # run strategies: an event that reaches none of `startmask`'s components
    # can change nothing for a key without a Part (set by the engine)
    cdef public int needs_part
    cdef public long startmask
    # the last positive component's one Stack, shared by every Part of the
    # plan when _any pushes its row and pops it around the match (set by the
    # engine; None: each Part owns its own)
    cdef public object last_stack
    cdef public list timeout_outputs
    cdef public i64 last_sweep
    cdef public long overflows  # integer results outside 64 bits (made missing)
    cdef public list functions  # user-defined functions (OP_UDF's table)
    cdef public list failures   # FunctionFailure of calls since the engine took them
    cdef public object pool     # the StringPool string values are interned in
    cdef int[:, ::1] code
    cdef i64[::1] const_cells  # owns the constant table `cvals` points into
    cdef Cell* cvals
    cdef u8[::1] ckinds
    cdef int[::1] pstart, plen
    cdef int pos[MAXC]
    cdef int rank[MAXC]
    cdef int kleene[MAXC]
    cdef int negated[MAXC]
    cdef int width[MAXC]
    cdef int iterf[MAXC]
    cdef int prevpos[MAXC]
    cdef int nextpos[MAXC]
    cdef int minc[MAXC]     # quantifier bounds; maxc 0 = unbounded
    cdef int maxc[MAXC]
    cdef int greedy[MAXC]
    cdef int filtered[MAXC]  # component c has filters (cp.comps[c].filters)
    cdef int killneg[MAXC]  # middle negation that ends the runs waiting at it (compile.py)
    cdef public int nkill   # how many components have killneg
    cdef int neggate[MAXC]  # middle negation: the component its events must pass checks with (-1: none)
    cdef int gate[MAXC]     # by positive rank: nearest earlier mandatory positive rank (-1: none)
    cdef int eqcol[MAXC][8]
    cdef int[::1] checks_ids, checks_start, checks_n
    cdef int[::1] negchk_ids, negchk_start, negchk_n
    cdef Cell* scratch[MAXC]
    cdef u8* scratch_k[MAXC]
    cdef public list outputs
    # the outputs' programs, for the per-match loops (which run over
    # `outputs`: with none, a context transition's marker, these arrays hold
    # one placeholder, which no loop may read)
    cdef int[::1] out_progs
    # an output that is one attribute as it is (`e.vid`): its component and
    # column, read in place of a VM call (-1: a program)
    cdef int[::1] out_comp, out_col
    cdef public object output_type  # the derived event type (plan id if none)
    # prefix sharing (Cayuga thesis ch. 4): a follower reads the stacks of
    # its first `share` components from its leader's Part of the same key
    cdef public object leader
    cdef public int share
