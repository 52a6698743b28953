# Shared C-level types of the Cython pattern engine: every engine module
# (stack, plan_runtime, vm, part, engine) cimports these, so the layout of a
# value, the kind tags and the opcodes are declared once. Opcode numbers and
# kind codes must match compile.py.

ctypedef unsigned char u8
ctypedef long long i64

# One attribute value: 8 bytes read according to its kind tag (K_INT, K_BOOL
# and K_STR use `i`: the integer, 0/1, the interned string code; K_FLOAT uses
# `f`). INT/LONG values are exact over the whole 64-bit range.
cdef union Cell:
    i64 i
    double f

cdef enum:
    MAXC = 16       # components per pattern
    MAXSTACK = 128  # VM value stack depth

# value kinds (the tag stored next to every value)
cdef enum:
    K_MISSING = 0
    K_INT = 1
    K_FLOAT = 2
    K_STR = 3
    K_BOOL = 4

# VM opcodes
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

# "no timestamp": below every event time
cdef extern from *:
    """
    #define CAESAR_NO_TS (-(1LL << 62))
    """
    const i64 NO_TS "CAESAR_NO_TS"

cdef struct Env:
    # per component index: its stack's value/kind arrays, row width, the
    # current row (Kleene: last element, or the element under test), and the
    # Kleene elements (local row ids) an aggregate folds over
    Cell* vals[MAXC]
    u8* kinds[MAXC]
    int width[MAXC]
    i64 row[MAXC]
    i64* klist[MAXC]
    int klen[MAXC]
