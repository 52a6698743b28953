# cython: language_level=3
"""The expression VM of the Cython engine: a small stack machine over the
postfix instruction arrays built by compile.py (never eval'ed text). Values
are doubles with a kind tag. Missing values, three-valued logic and the
arithmetic rules follow src/caesar/services/matcher/expr_eval.py."""

cimport cython
from libc.math cimport ceil, fabs, floor, fmod, isfinite, isnan
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
)


cdef u8 aggregate(PlanRT p, int func, int c, int sub, Env* env, double* out) except 255:
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
                    if (seen_k[i] == K_STR) == (k == K_STR) and seen_v[i] == v:
                        dup = 1
                        break
                if not dup:
                    seen_v[m] = v
                    seen_k[m] = k
                    m += 1
            elif isnum(k):
                if func == 2 or func == 3:
                    acc += v
                    if k == K_FLOAT:
                        acck = K_FLOAT
                    m += 1
                elif func == 4:
                    if m == 0 or v < best:
                        best = v
                        bestk = numkind(k)
                    m += 1
                elif func == 5:
                    if m == 0 or v > best:
                        best = v
                        bestk = numkind(k)
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
cdef u8 eval_prog(PlanRT p, int prog, Env* env, double* out) except 255:
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
            if isnum(sk[sp - 1]):
                sv[sp - 1] = -sv[sp - 1]
                sk[sp - 1] = numkind(sk[sp - 1])
            else:
                sk[sp - 1] = K_MISSING
        elif op == OP_NOT:
            ta = truth(sk[sp - 1], sv[sp - 1])
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
            if not (isnum(kx) and isnum(ky)):
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
                sv[sp - 1] = ta
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
            x = sv[sp]
            kx = numkind(sk[sp])
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
                        kx = numkind(sk[sp + i])
            sv[sp] = r
            sk[sp] = kx
            sp += 1
        elif op == OP_AGG:
            sk[sp] = aggregate(p, a, b, c, env, &sv[sp])
            sp += 1
    if sp <= 0:
        return K_MISSING
    out[0] = sv[sp - 1]
    return sk[sp - 1]


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


cdef object pyvalue(u8 k, double v, pool):
    if k == K_INT:
        return int(v)
    if k == K_FLOAT:
        return v
    if k == K_BOOL:
        return v != 0
    if k == K_STR:
        return pool.string(<int> v)
    return None
