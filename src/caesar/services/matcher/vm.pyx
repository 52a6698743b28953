# cython: language_level=3
"""The expression VM of the Cython engine: a small stack machine over the
postfix instruction arrays built by compile.py (never eval'ed text). Values
are 8-byte cells with a kind tag (typedefs.pxd): INT/LONG exact over the
64-bit range, DOUBLE as IEEE doubles, strings as interned codes. Missing
values, three-valued logic and the arithmetic rules follow
src/caesar/services/matcher/expr_eval.py; an integer result outside the
64-bit range is missing and counted in the plan's `overflows`."""

cimport cython
from libc.math cimport ceil, fabs, floor, fmod, isfinite
from libc.stdlib cimport free, malloc

from caesar.services.matcher.plan_runtime cimport PlanRT
from caesar.services.matcher.typedefs cimport (
    MAXSTACK,
    OP_ADD,
    OP_AGG,
    OP_AND,
    OP_CALL,
    OP_CONST,
    OP_DIV,
    OP_EQ,
    OP_GE,
    OP_GT,
    OP_LE,
    OP_LOAD,
    OP_LT,
    OP_MOD,
    OP_MUL,
    OP_NE,
    OP_NEG,
    OP_NOT,
    OP_OR,
    OP_SUB,
    OP_UDF,
)

from caesar.plans.functions import FunctionFailure


cdef extern from *:
    """
    typedef __int128 caesar_i128;
    static inline int caesar_add_ovf(long long a, long long b, long long *r) {
        return __builtin_add_overflow(a, b, r);
    }
    static inline int caesar_sub_ovf(long long a, long long b, long long *r) {
        return __builtin_sub_overflow(a, b, r);
    }
    static inline int caesar_mul_ovf(long long a, long long b, long long *r) {
        return __builtin_mul_overflow(a, b, r);
    }
    """
    ctypedef long long i128 "caesar_i128"
    bint add_ovf "caesar_add_ovf"(i64 a, i64 b, i64* r) noexcept nogil
    bint sub_ovf "caesar_sub_ovf"(i64 a, i64 b, i64* r) noexcept nogil
    bint mul_ovf "caesar_mul_ovf"(i64 a, i64 b, i64* r) noexcept nogil

cdef i64 I64_MIN = -9223372036854775807 - 1
# doubles at or beyond these do not fit in 64 bits after floor/ceil
cdef double TWO63 = 9223372036854775808.0


cdef inline bint i128_fits(i128 v) noexcept:
    return v >= <i128> I64_MIN and v <= <i128> 9223372036854775807


cdef u8 aggregate(PlanRT p, int func, int c, int sub, Env* env, Cell* out) except 255:
    """Cayuga FOLD over the Kleene elements of component c: count,
    count_distinct, sum, avg, min, max, first, last (codes of compile.AGGS),
    as expr_eval.aggregate: missing values skipped except by first/last,
    sums exact (128-bit) while every value is an integer."""
    cdef int n = env.klen[c], j, m = 0, i, dup
    cdef i64 saved = env.row[c]
    cdef Cell v, best
    cdef u8 k, bestk = K_MISSING
    cdef bint floating = False
    cdef i128 iacc = 0
    cdef double facc = 0
    cdef Cell* seen_v = NULL
    cdef u8* seen_k = NULL
    v.i = 0
    best.i = 0
    if func == 1:
        seen_v = <Cell*> malloc((n + 1) * sizeof(Cell))
        seen_k = <u8*> malloc((n + 1) * sizeof(u8))
    try:
        for j in range(n):
            env.row[c] = env.klist[c][j]
            if sub < 0:
                v.i = 1
                k = K_BOOL
            else:
                k = eval_prog(p, sub, env, &v)
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
                    if same_value(seen_k[i], seen_v[i], k, v):  # NaN: never
                        dup = 1
                        break
                if not dup:
                    seen_v[m] = v
                    seen_k[m] = k
                    m += 1
            elif isnum(k):
                if func == 2 or func == 3:
                    # left to right like Python's int/float addition: exact
                    # while every value is an integer, doubles from the first
                    # DOUBLE on
                    if k == K_FLOAT:
                        if not floating:
                            facc = <double> iacc
                            floating = True
                        facc = facc + v.f
                    elif floating:
                        facc = facc + <double> v.i
                    else:
                        iacc += v.i
                    m += 1
                elif func == 4:
                    if m == 0 or cmp_num(k, v, bestk, best) == -1:
                        best = v
                        bestk = numkind(k)
                    m += 1
                elif func == 5:
                    if m == 0 or cmp_num(k, v, bestk, best) == 1:
                        best = v
                        bestk = numkind(k)
                    m += 1
    finally:
        env.row[c] = saved
        free(seen_v)
        free(seen_k)
    if func == 0 or func == 1:
        out[0].i = m
        return K_INT
    if func == 6 or func == 7:
        out[0] = best
        return bestk
    if m == 0:
        return K_MISSING
    if func == 2:
        if floating:
            out[0].f = facc
            return K_FLOAT
        if not i128_fits(iacc):
            p.overflows += 1
            return K_MISSING
        out[0].i = <i64> iacc
        return K_INT
    if func == 3:
        out[0].f = (facc if floating else <double> iacc) / <double> m
        return K_FLOAT
    out[0] = best
    return bestk


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline void _operand(PlanRT p, int pc, Env* env, u8* k, Cell* v) noexcept:
    """The value an OP_LOAD or OP_CONST at pc pushes."""
    cdef int a = p.code[pc, 1]
    if p.code[pc, 0] == OP_CONST:
        v[0] = p.cvals[a]
        k[0] = p.ckinds[a]
        return
    k[0] = load_cell(env, a, p.code[pc, 2], v)


cdef inline u8 _compare(int op, u8 kx, Cell x, u8 ky, Cell y, Cell* out) noexcept:
    """x op y for a comparison op: K_BOOL with the truth in out, or
    K_MISSING (a missing side, a string against a number, an order between
    strings, NaN)."""
    cdef int tb, ta
    if kx == K_MISSING or ky == K_MISSING:
        return K_MISSING
    if kx == K_STR or ky == K_STR:
        if kx != ky or (op != OP_EQ and op != OP_NE):
            return K_MISSING
        tb = 0 if x.i == y.i else 1
    else:
        tb = cmp_num(kx, x, ky, y)
        if tb == 2:  # NaN
            return K_MISSING
    if op == OP_EQ:
        ta = tb == 0
    elif op == OP_NE:
        ta = tb != 0
    elif op == OP_LT:
        ta = tb < 0
    elif op == OP_LE:
        ta = tb <= 0
    elif op == OP_GT:
        ta = tb > 0
    else:
        ta = tb >= 0
    out[0].i = ta
    return K_BOOL


@cython.boundscheck(False)
cdef u8 eval_prog(PlanRT p, int prog, Env* env, Cell* out) except 255:
    cdef Cell sv[MAXSTACK]
    cdef u8 sk[MAXSTACK]
    cdef int sp = 0, pc, end, op, a, b, c, ta, tb, i
    cdef i64 ri
    cdef double x, y, r
    cdef u8 kx, ky
    pc = p.pstart[prog]
    end = pc + p.plen[prog]
    if end == pc + 1 and p.code[pc, 0] == OP_LOAD:
        # one attribute as it is (most outputs: `e.vid`): no stack
        return load_cell(env, p.code[pc, 1], p.code[pc, 2], out)
    if end == pc + 3 and p.code[pc, 0] == OP_LOAD and OP_EQ <= p.code[pc + 2, 0] <= OP_GE \
            and (p.code[pc + 1, 0] == OP_LOAD or p.code[pc + 1, 0] == OP_CONST):
        # an attribute compared with an attribute or a constant (most
        # checks: `b.lane = a.lane`, `n.toll > 0`): no stack
        _operand(p, pc, env, &kx, &sv[0])
        _operand(p, pc + 1, env, &ky, &sv[1])
        return _compare(p.code[pc + 2, 0], kx, sv[0], ky, sv[1], out)
    while pc < end:
        op = p.code[pc, 0]
        a = p.code[pc, 1]
        b = p.code[pc, 2]
        c = p.code[pc, 3]
        pc += 1
        if op == OP_LOAD:
            sk[sp] = load_cell(env, a, b, &sv[sp])
            sp += 1
        elif op == OP_CONST:
            sv[sp] = p.cvals[a]
            sk[sp] = p.ckinds[a]
            sp += 1
        elif op == OP_NEG:
            kx = sk[sp - 1]
            if kx == K_FLOAT:
                sv[sp - 1].f = -sv[sp - 1].f
            elif kx == K_INT or kx == K_BOOL:
                if sv[sp - 1].i == I64_MIN:
                    p.overflows += 1
                    sk[sp - 1] = K_MISSING
                else:
                    sv[sp - 1].i = -sv[sp - 1].i
                    sk[sp - 1] = K_INT
            else:
                sk[sp - 1] = K_MISSING
        elif op == OP_NOT:
            ta = truth(sk[sp - 1], sv[sp - 1])
            if ta < 0:
                sk[sp - 1] = K_MISSING
            else:
                sv[sp - 1].i = 1 - ta
                sk[sp - 1] = K_BOOL
        elif op <= OP_MOD:
            sp -= 1
            kx = sk[sp - 1]
            ky = sk[sp]
            if not (isnum(kx) and isnum(ky)):
                sk[sp - 1] = K_MISSING
                continue
            if kx != K_FLOAT and ky != K_FLOAT and op != OP_DIV:
                # integer arithmetic, exact, overflow -> missing
                if op == OP_ADD:
                    ta = add_ovf(sv[sp - 1].i, sv[sp].i, &ri)
                elif op == OP_SUB:
                    ta = sub_ovf(sv[sp - 1].i, sv[sp].i, &ri)
                elif op == OP_MUL:
                    ta = mul_ovf(sv[sp - 1].i, sv[sp].i, &ri)
                elif sv[sp].i == 0:
                    sk[sp - 1] = K_MISSING
                    continue
                elif sv[sp].i == -1:
                    ta = 0
                    ri = 0  # x % -1 (and no overflow for x = INT64_MIN)
                else:
                    ta = 0
                    ri = sv[sp - 1].i % sv[sp].i
                    if ri != 0 and ((ri < 0) != (sv[sp].i < 0)):
                        ri += sv[sp].i
                if ta:
                    p.overflows += 1
                    sk[sp - 1] = K_MISSING
                else:
                    sv[sp - 1].i = ri
                    sk[sp - 1] = K_INT
                continue
            # a DOUBLE is involved (or `/`): both operands as doubles
            x = as_double(kx, sv[sp - 1])
            y = as_double(ky, sv[sp])
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
            else:
                r = fmod(x, y)
                if r != 0 and ((r < 0) != (y < 0)):
                    r += y
            sv[sp - 1].f = r
            sk[sp - 1] = K_FLOAT
        elif op <= OP_GE:
            sp -= 1
            sk[sp - 1] = _compare(op, sk[sp - 1], sv[sp - 1], sk[sp], sv[sp], &sv[sp - 1])
        elif op == OP_AND or op == OP_OR:
            sp -= 1
            ta = truth(sk[sp - 1], sv[sp - 1])
            tb = truth(sk[sp], sv[sp])
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
                sv[sp - 1].i = ta
                sk[sp - 1] = K_BOOL
        elif op == OP_CALL:
            # a = function, b = number of arguments
            sp -= b
            kx = K_INT
            for i in range(b):
                if not isnum(sk[sp + i]):
                    kx = K_MISSING
                    break
            if kx == K_MISSING or b == 0:
                sk[sp] = K_MISSING
                sp += 1
                continue
            kx = numkind(sk[sp])
            if a == 0:  # abs
                if kx == K_FLOAT:
                    sv[sp].f = fabs(sv[sp].f)
                elif sv[sp].i == I64_MIN:
                    p.overflows += 1
                    kx = K_MISSING
                elif sv[sp].i < 0:
                    sv[sp].i = -sv[sp].i
            elif a == 1 or a == 2:  # floor, ceil: integers stay as they are
                if kx == K_FLOAT:
                    x = sv[sp].f
                    if not isfinite(x):
                        kx = K_MISSING
                    else:
                        r = floor(x) if a == 1 else ceil(x)
                        if r >= TWO63 or r < -TWO63:
                            p.overflows += 1
                            kx = K_MISSING
                        else:
                            sv[sp].i = <i64> r
                            kx = K_INT
            else:  # least, greatest: the first extreme, exactly compared
                for i in range(1, b):
                    tb = cmp_num(sk[sp + i], sv[sp + i], kx, sv[sp])
                    if (a == 3 and tb == -1) or (a == 4 and tb == 1):
                        sv[sp] = sv[sp + i]
                        kx = numkind(sk[sp + i])
            sk[sp] = kx
            sp += 1
        elif op == OP_AGG:
            sk[sp] = aggregate(p, a, b, c, env, &sv[sp])
            sp += 1
        elif op == OP_UDF:
            # a = function, b = number of arguments
            sp -= b
            sk[sp] = call_udf(p, a, b, &sv[sp], &sk[sp])
            sp += 1
    if sp <= 0:
        return K_MISSING
    out[0] = sv[sp - 1]
    return sk[sp - 1]


cdef u8 call_udf(PlanRT p, int f, int n, Cell* args, u8* kinds) except 255:
    """Call user-defined function f of the plan with the n values at args
    (plans/functions.py: missing if an argument is; a failure is missing and
    kept in p.failures); its result goes to args[0], its kind is returned."""
    cdef int i
    cdef object value
    for i in range(n):
        if kinds[i] == K_MISSING:
            return K_MISSING
    udf = p.functions[f]
    try:
        value = udf.invoke([pyvalue(kinds[i], args[i], p.pool) for i in range(n)])
    except FunctionFailure as failure:
        p.failures.append(failure)
        return K_MISSING
    if value is None:
        return K_MISSING
    if udf.returns == "float":
        args[0].f = value
        return K_FLOAT
    if udf.returns == "string":
        args[0].i = p.pool.code(value)
        return K_STR
    args[0].i = value  # int (checked to fit in 64 bits) or bool
    return K_BOOL if udf.returns == "bool" else K_INT


cdef bint checks(PlanRT p, int level, Env* env) except -1:
    cdef int i, s = p.checks_start[level], n = p.checks_n[level]
    for i in range(n):
        if not holds(p, p.checks_ids[s + i], env):
            return False
    return True


cdef bint negchecks(PlanRT p, int c, Env* env) except -1:
    cdef int i, s = p.negchk_start[c], n = p.negchk_n[c]
    for i in range(n):
        if not holds(p, p.negchk_ids[s + i], env):
            return False
    return True


cdef object pyvalue(u8 k, Cell v, pool):
    if k == K_INT:
        return v.i
    if k == K_FLOAT:
        return v.f
    if k == K_BOOL:
        return v.i != 0
    if k == K_STR:
        return pool.string(<int> v.i)
    return None


cdef object key_of(u8 k, Cell v):
    """A value as a dict key with the equality of an equivalence test:
    numbers equal by value (5 == 5.0 == True, exactly), strings only equal
    strings (their code, wrapped so it never equals a number), missing and
    NaN have no key (None). An int key is a new int: session 41's table
    of them (one object per key, so dicts hit on identity) took 8 MB of
    places read at random, a cache miss or two per key, and cost more time
    than the int compares it saved (LR, side by side: 4 % of the pipeline)."""
    if k == K_INT or k == K_BOOL:
        return v.i
    if k == K_FLOAT:
        return None if v.f != v.f else v.f
    if k == K_STR:
        return (v.i,)
    return None
