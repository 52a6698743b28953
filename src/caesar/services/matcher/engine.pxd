# C-level contract of engine.pyx: the engine's per-batch state and the
# methods of its event loop.
from caesar.services.matcher.part cimport Part
from caesar.services.matcher.plan_runtime cimport PlanRT
from caesar.services.matcher.stack cimport Stack
from caesar.services.matcher.typedefs cimport Cell, Env, i64, u8


cdef class _Group:
    cdef public PlanRT rep
    cdef public int comp
    cdef public list filters
    cdef public list members   # (PlanRT, comp index)
    cdef public object mapping
    cdef public int[::1] slots   # members, as arrays for the hot loop
    cdef public int[::1] comps


cdef class _Sweep:
    # one plan's sweep of idle parts in progress (CythonEngine._sweep_slice)
    cdef list partitions      # those still to visit, taken from the end
    cdef object partition     # the one being visited
    cdef object keyed         # its {key: Part} dict (None: take the next partition)
    cdef Py_ssize_t pos       # PyDict_Next's position in it
    cdef Py_ssize_t n         # parts when the sweep started
    cdef Py_ssize_t done      # parts handed to slices so far
    cdef i64 started          # the watermark it started at


cdef class CythonEngine:
    cdef list _plans
    cdef list _udf_plans      # plans calling user-defined functions
    cdef dict _by_id
    cdef dict _parts          # slot -> {partition -> {eqkey -> Part}}
    cdef dict _type_cols      # type -> tuple of attribute names (batch matrix layout)
    cdef dict _tid            # type -> dense id
    cdef list _type_groups    # by type id: unindexed _Group list (this call's: _for_active)
    cdef list _groups_all     # the same for every plan
    cdef list _type_index     # by type id: [(type col, {value -> [_Group]})]
    cdef list _maps           # ((slot * MAXC) + comp) * ntypes + tid -> col map (None = identity)
    cdef int** _mapp          # the same maps as pointers into those arrays (NULL = identity)
    cdef int _ntypes
    cdef list _strict         # plans with strict contiguity (see every event)
    cdef list _pcont          # by type id: [(plan, comp)], partition contiguity (see the type)
    cdef int* _pcs            # _pcont's and _strict's slots (__init__)
    cdef int* _pco
    # Active-node index (Cayuga AN): for skip-till-any-match, component k>0
    # only needs an event when component k-1 holds one in the same PAIS key.
    # by type id: [(type cols of the equivalence attrs, {eqkey: {slot: comp mask}})]
    cdef list _an_specs       # (this call's: _for_active)
    cdef list _specs_all      # every plan's
    cdef dict _an_tables      # (slot, comp) -> [table dicts to register in]
    cdef i64 _an_version      # bumped when a partition enters or leaves an AN table
    cdef dict _waiting        # slot -> {part: None}: parts holding pending/ready results
    cdef dict _sweeps         # slot -> _Sweep in progress
    cdef public Py_ssize_t sweep_min  # least parts per slice (_SWEEP_MIN)
    cdef object _pool
    cdef list _out
    cdef bint _columnar       # this call's matches go to the MatchSinks (*_columns)
    cdef list _sinks          # by slot: the MatchSink of the plan's output type
    cdef dict _sink_of        # (plan id, event type) -> MatchSink (every sink)
    cdef i64 _emitted         # matches of this call so far (their order)
    cdef long* _masks         # per plan slot: components the current event reaches
    cdef list _kdict          # per plan slot: its parts of partition _kpart[slot] (or None)
    cdef i64* _kpart
    cdef int* _hits
    cdef int _nhit
    cdef u8[::1] _act
    cdef bint _use_act
    cdef dict _act_cache      # tuple(active) -> (_act, _type_groups, _an_specs) of that call
    # current event (valid while one event is dispatched)
    cdef i64 _ts, _seq, _partition
    # the current event's ts and seq as Python ints, made on the first match
    # it completes and shared by all of them (dense matches: ~10 per event)
    cdef object _ts_obj, _seq_obj
    cdef object _partition_obj  # _partition as an int object (_pobj), boxed when it is _pobj_of
    # the last one-column equivalence key made (_eqkey) and the cell it was
    # made of: the plans of one event keyed by the same attribute share it
    cdef u8 _kc_kind
    cdef i64 _kc_val
    cdef object _kc_obj
    cdef i64 _pobj_of
    # the int objects _pobj boxed (vm.int_in's table of _PC places): a
    # partition is boxed once while its place holds it, so the dicts keyed
    # by it hit on identity (an int compare per lookup otherwise)
    cdef list _pc
    cdef i64* _pc_id
    cdef Cell* _row_v
    cdef u8* _row_k
    cdef i64 _lo
    cdef Part _part
    cdef PlanRT _plan
    cdef list _followers      # plans sharing a prefix with a leader plan
    cdef i64 _last_local
    cdef int _last_comp
    # group prefetching (_prefetch): per type id t, the (slot, type column
    # of the key) of the plans keyed by one attribute that take t, as
    # _pft[2 * _pfo[t]:2 * _pfo[t + 1]]
    cdef int* _pfo
    cdef int* _pft
    cdef _point_maps(self)
    cdef int _prefetch(self, i64[:, ::1] vals, u8[:, ::1] kinds, int[::1] tids, i64[::1] part,
                       Py_ssize_t e0, Py_ssize_t e1) except -1

    cdef Part _leader_part(self, PlanRT p, object partition, object key)
    cdef _relink(self, PlanRT p, Part part, object partition, object key)
    cdef _run_batch(self, i64[:, ::1] vals, u8[:, ::1] kinds, int[::1] tids, i64[::1] ts, i64[::1] seq, i64[::1] part)
    cdef _for_active(self)
    cdef object _pobj(self)
    cdef int _offer_an(self, int tid) except -1
    cdef int _offer(self, _Group g, int tid) except -1
    cdef int _extract(self, PlanRT p, int c, int tid) except -1
    cdef object _eqkey(self, PlanRT p, int c)
    cdef Part _find_part(self, PlanRT p, object key)
    cdef int _equal_run_step(self, PlanRT p, Part part, bint took) except -1
    cdef Stack _equal_run_stack(self, PlanRT p, Part part)
    cdef Part _get_part(self, PlanRT p, object key)
    cdef _on_plan(self, PlanRT p, long mask, int tname)
    cdef int _solo(self, PlanRT p, int tname) except -1
    cdef _an_forget(self, PlanRT p, object partition, object key)
    cdef _an_register_after(self, PlanRT p, int k, object pkey)
    cdef _an_register_end(self, PlanRT p, object pkey)
    cdef _an_register(self, PlanRT p, int c, object key, bint on)
    cdef _any(self, PlanRT p, Part part, long mask, object key)
    cdef _construct(self, PlanRT p, Part part, i64 last_row)
    cdef bint _eq_last(self, PlanRT p, Part part, int c, i64 row) except -1
    cdef int _dfs(self, PlanRT p, Part part, Env* env, int k, i64 after) except -1
    cdef int _kleene(self, PlanRT p, Part part, Env* env, int k, int m, i64 after) except -1
    cdef int _finish(self, PlanRT p, Part part, Env* env) except -1
    cdef _hold(self, PlanRT p, Part part, Env* env, derived)
    cdef _release(self, PlanRT p, Part part)
    cdef bint _neg_equiv(self, PlanRT p, Part part, Env* env, int c, Cell* v, u8* k) except -1
    cdef _part_pending(self, Part part, PlanRT p, Env* env, i64 deadline, derived)
    cdef object _derive(self, PlanRT p, Part part, Env* env, i64 first_ts, i64 last_ts)
    cdef object _seq_int(self, i64 seq)
    cdef _put(self, PlanRT p, object ev)
    cdef int _sink_match(self, PlanRT p, Part part, Env* env, i64 first_ts, i64 last_ts) except -1
    cdef _clear_sinks(self)
    cdef _take(self)
    cdef bint _kills(self, PlanRT p, Part part, list item, long mask) except -1
    cdef bint _may_block(self, PlanRT p, Part part, int c) except -1
    cdef i64 _run_first_ts(self, Part part, PlanRT p, list run)
    cdef i64 _row_for(self, PlanRT p, Part part, int c, i64* pushed) except -2
    cdef int _load_run(self, PlanRT p, Part part, list run, Env* env, i64** bufs) except -1
    cdef bint _run_ok(self, PlanRT p, Part part, list run, int c, Env* env, i64 local_row) except -1
    cdef bint _can_extend(self, PlanRT p, Part part, list run, Env* env, i64 local_row) except -1
    cdef bint _can_bind(self, PlanRT p, Part part, list run, int j, Env* env, i64 local_row) except -1
    cdef object _advance_run(self, PlanRT p, Part part, list run, long mask, Env* env, i64** bufs, i64* pushed)
    cdef object _extend_run(self, PlanRT p, Part part, list run, long mask, Env* env, i64** bufs, i64* pushed)
    cdef bint _extendable(self, PlanRT p, list run)
    cdef object _advance_first(self, PlanRT p, Part part, long mask, Env* env, i64** bufs, i64* pushed,
                               list dead)
    cdef bint _closed(self, PlanRT p, Part part, list run, Env* env, i64** bufs) except -1
    cdef _expire_runs(self, PlanRT p, Part part, i64 bound)
    cdef _sweep_slice(self, PlanRT p, i64 wm)
    cdef Py_ssize_t _sweep_walk(self, PlanRT p, _Sweep s, dict keyed, Py_ssize_t left,
                                i64 bound) except -1
    cdef bint _prune(self, PlanRT p, Part part, i64 bound) except -1
    cdef int _sweep_keys(self, PlanRT p, object partition, list keys, i64 bound) except -1
    cdef object _drop_partition(self, PlanRT p, object partition)
    cdef object _derive_timeout(self, PlanRT p, Part part, Env* env, list run)
    cdef _runs_step(self, PlanRT p, Part part, long mask)
    cdef i64 _waiting_lo(self, PlanRT p, Part part, int c)
    cdef bint _killed(self, PlanRT p, Part part, list run, Env* env, i64** bufs) except -1
    cdef _trim(self, PlanRT p, Part part, object key)
    cdef _complete(self, PlanRT p, Part part, list run, Env* env, i64** bufs)
