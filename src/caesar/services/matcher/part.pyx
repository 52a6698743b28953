# cython: language_level=3
"""Per-key run state: one Part per (plan, partition, equivalence key)."""

cimport cython

from cpython.ref cimport Py_INCREF
from cpython.ref cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_New, PyTuple_SET_ITEM

from caesar.services.matcher.stack cimport Stack, empty_stack, new_stack
from caesar.services.matcher.typedefs cimport i64

cdef i64 _NEVER = -(1 << 62)


cdef inline int _fill(Part part, PlanRT p, object key) except -1:
    """A new part's state: an empty stack per component, nothing pending."""
    cdef int c, cl = p.pos[p.npos - 1] if p.npos > 0 and p.last_stack is not None else -1
    cdef tuple stacks = PyTuple_New(p.ncomp)
    cdef Stack s
    for c in range(p.ncomp):  # the tuple filled in place: no list in between
        if c == cl:
            s = <Stack> p.last_stack  # empty between events (engine._mark_fast_paths)
        else:
            s = empty_stack(p.width[c])  # made its own on the first push (own_stack)
        Py_INCREF(s)  # PyTuple_SET_ITEM steals a reference
        PyTuple_SET_ITEM(stacks, c, s)
    part.key = key
    part.stacks = stacks
    part.runs = ()
    part.pending = ()
    part.ready = ()
    part.held = ()
    part.touched = _NEVER
    return 0


@cython.no_gc
cdef class Part:
    # Parts are many (one per plan and key) and never form cycles; keeping
    # them (and their empty containers, shared `()`) out of the cyclic GC
    # keeps collections from scanning the whole state.

    def __init__(self, PlanRT p, key=None):
        _fill(self, p, key)

    cdef bint empty(self):
        cdef Py_ssize_t c
        cdef PyObject* sp
        if has_items(self.runs) or has_items(self.pending) or has_items(self.ready) \
                or has_items(self.held):
            return False
        for c in range(len(self.stacks)):
            sp = PyTuple_GET_ITEM(self.stacks, c)  # borrowed: no type test or count
            if (<Stack> sp).n > (<Stack> sp).head:
                return False
        return True


cdef Part new_part(PlanRT p, object key):
    """Part(p, key) without the Python call (argument parsing): the engine
    makes one whenever a key shows up in a partition (LR: a car in a segment
    it was not in), 4.8 % of the embedded pipeline's time when it went
    through Part() (session 26's profile)."""
    cdef Part part = Part.__new__(Part)
    _fill(part, p, key)
    return part


cdef Stack own_stack(Part part, int c):
    """Component c's stack of this part, to push into: the shared empty one
    replaced by a Stack of its own (in a new stacks tuple: a follower of a
    shared prefix sees the change when it relinks, engine._relink)."""
    cdef Stack s = <Stack> part.stacks[c]
    cdef tuple old, stacks
    cdef Py_ssize_t i, n
    if not s.shared:
        return s
    s = new_stack(s.width)
    old = part.stacks
    n = len(old)
    stacks = PyTuple_New(n)
    for i in range(n):
        item = s if i == c else old[i]
        Py_INCREF(item)
        PyTuple_SET_ITEM(stacks, i, item)
    part.stacks = stacks
    return s
