# C-level contract of vm.pyx: the expression VM over compile.py's
# instruction arrays. The small helpers are inline here so every module that
# cimports them gets them inlined (they sit on the hot path).
from caesar.services.matcher.plan_runtime cimport PlanRT
from caesar.services.matcher.typedefs cimport (
    K_BOOL,
    K_FLOAT,
    K_INT,
    K_MISSING,
    K_STR,
    Env,
    i64,
    u8,
)


cdef u8 eval_prog(PlanRT p, int prog, Env* env, double* out) except 255
cdef u8 aggregate(PlanRT p, int func, int c, int sub, Env* env, double* out) except 255
cdef bint checks(PlanRT p, int level, Env* env) except -1
cdef bint negchecks(PlanRT p, int c, Env* env) except -1
cdef object pyvalue(u8 k, double v, pool)


cdef inline bint isnum(u8 k) noexcept:
    return k == K_INT or k == K_FLOAT or k == K_BOOL


cdef inline int truth(u8 k, double v) noexcept:
    if k == K_INT or k == K_FLOAT or k == K_BOOL:
        return 1 if v != 0 else 0
    return -1


cdef inline u8 numkind(u8 k) noexcept:
    return K_FLOAT if k == K_FLOAT else K_INT


cdef inline bint holds(PlanRT p, int prog, Env* env) except -1:
    cdef double v = 0
    cdef u8 k = eval_prog(p, prog, env, &v)
    return truth(k, v) == 1


cdef inline bint eq_vals(double* va, u8* ka, double* vb, u8* kb, PlanRT p, int ca, int cb) noexcept:
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
