# C-level contract of vm.pyx: the expression VM over compile.py's
# instruction arrays, and the value helpers the engine shares with it. The
# small helpers are inline here so every module that cimports them gets them
# inlined (they sit on the hot path).
#
# Values follow src/caesar/services/matcher/expr_eval.py exactly: INT/LONG
# (and BOOL as 0/1) are 64-bit integers, compared and combined exactly; a
# comparison between an integer and a DOUBLE is exact (as in Python, never by
# rounding the integer to a double); integer results outside the 64-bit range
# are missing and counted in PlanRT.overflows.
from cpython.list cimport PyList_GET_ITEM
from libc.math cimport isnan, trunc

from caesar.services.matcher.plan_runtime cimport PlanRT
from caesar.services.matcher.typedefs cimport (
    K_BOOL,
    K_FLOAT,
    K_INT,
    K_MISSING,
    K_STR,
    Cell,
    Env,
    i64,
    u8,
)


cdef u8 eval_prog(PlanRT p, int prog, Env* env, Cell* out) except 255
cdef u8 aggregate(PlanRT p, int func, int c, int sub, Env* env, Cell* out) except 255
cdef bint checks(PlanRT p, int level, Env* env) except -1
cdef bint negchecks(PlanRT p, int c, Env* env) except -1
cdef object pyvalue(u8 k, Cell v, pool)
cdef u8 call_udf(PlanRT p, int f, int n, Cell* args, u8* kinds) except 255
cdef object key_of(u8 k, Cell v)


cdef inline object int_in(i64* keys, list objs, Py_ssize_t mask, i64 v):
    """v as a Python int through a direct-mapped table of mask + 1 places
    (keys, objs) by v's low bits: the one int a place holds while it holds
    v, so the dicts keyed by it hit on identity and no int is made per use
    (the engine's partitions, seqs and timestamps: few live values, a small
    table). A place starts with a key it cannot hold (int_table_init)."""
    cdef Py_ssize_t at = v & mask
    cdef object o  # an object: a C int inferred here was boxed twice (two ints)
    if keys[at] == v:
        return <object> PyList_GET_ITEM(objs, at)
    o = v
    objs[at] = o
    keys[at] = v
    return o


cdef inline void int_table_init(i64* keys, Py_ssize_t n) noexcept:
    """Place i holds key i + 1, which its low bits never give (int_in)."""
    cdef Py_ssize_t i
    for i in range(n):
        keys[i] = i + 1


cdef inline u8 load_cell(Env* env, int c, int col, Cell* out) noexcept:
    """Column col of component c's current row: its kind, the value in out;
    missing (out 0) when c bound nothing (an optional component). What
    OP_LOAD pushes, and what the engine reads for a one-attribute output."""
    cdef i64 row = env.row[c], i
    if row < 0:
        out[0].i = 0
        return K_MISSING
    i = row * env.width[c] + col
    out[0] = env.vals[c][i]
    return env.kinds[c][i]


cdef inline bint isnum(u8 k) noexcept:
    return k == K_INT or k == K_FLOAT or k == K_BOOL


cdef inline int truth(u8 k, Cell v) noexcept:
    """1 true, 0 false, -1 unknown (three-valued)."""
    if k == K_INT or k == K_BOOL:
        return 1 if v.i != 0 else 0
    if k == K_FLOAT:
        return 1 if v.f != 0 else 0
    return -1


cdef inline u8 numkind(u8 k) noexcept:
    return K_FLOAT if k == K_FLOAT else K_INT


cdef inline double as_double(u8 k, Cell v) noexcept:
    return v.f if k == K_FLOAT else <double> v.i


cdef inline int cmp_int_double(i64 i, double f) noexcept:
    """Exact three-way comparison of an integer with a (non-NaN) double."""
    cdef double t
    cdef i64 ti
    if f >= 9223372036854775808.0:
        return -1
    if f < -9223372036854775808.0:
        return 1
    t = trunc(f)  # |t| < 2**63: exact as an integer
    ti = <i64> t
    if i < ti:
        return -1
    if i > ti:
        return 1
    if f > t:
        return -1
    if f < t:
        return 1
    return 0


cdef inline int cmp_num(u8 ka, Cell a, u8 kb, Cell b) noexcept:
    """Exact three-way comparison of two numbers; 2 when unordered (NaN)."""
    if ka != K_FLOAT and kb != K_FLOAT:
        return -1 if a.i < b.i else (1 if a.i > b.i else 0)
    if ka == K_FLOAT and kb == K_FLOAT:
        if isnan(a.f) or isnan(b.f):
            return 2
        return -1 if a.f < b.f else (1 if a.f > b.f else 0)
    if ka == K_FLOAT:
        if isnan(a.f):
            return 2
        return -cmp_int_double(b.i, a.f)
    if isnan(b.f):
        return 2
    return cmp_int_double(a.i, b.f)


cdef inline bint same_value(u8 ka, Cell a, u8 kb, Cell b) noexcept:
    """Equality as in an equivalence test [attr]: present, strings only
    equal strings, numbers compared exactly, NaN never equal."""
    if ka == K_MISSING or kb == K_MISSING:
        return False
    if ka == K_STR or kb == K_STR:
        return ka == kb and a.i == b.i
    return cmp_num(ka, a, kb, b) == 0


cdef inline bint holds(PlanRT p, int prog, Env* env) except -1:
    cdef Cell v
    v.i = 0
    cdef u8 k = eval_prog(p, prog, env, &v)
    return truth(k, v) == 1


cdef inline bint eq_vals(Cell* va, u8* ka, Cell* vb, u8* kb, PlanRT p, int ca, int cb) noexcept:
    """Equivalence test between a row of component ca and a row of cb."""
    cdef int j, ia, ib
    for j in range(p.neq):
        ia = p.eqcol[ca][j]
        ib = p.eqcol[cb][j]
        if ia < 0 or ib < 0:
            return False
        if not same_value(ka[ia], va[ia], kb[ib], vb[ib]):
            return False
    return True
