"""The engine's C loops stay C loops: a `for i in range(n)` whose index is
not declared (`cdef int i`) compiles to a Python range object and boxed
integers. Nothing fails, it is only ~8x slower: 22681d5 dropped `i` from
eval_prog's declarations as unused and the toll computation of Linear Road
went from ~590 to ~4,900 instructions per call. This reads the C Cython
generated beside each source (setup.py build_ext --inplace, as the setup
script builds) and names every loop that builds a range object."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

import caesar

SRC = Path(caesar.__file__).parent
# range objects built on purpose, where speed does not matter:
# (module, source line, how many) -> why
ALLOWED = {
    ("engine.pyx", "if mp != list(range(len(mp))):", 1): "once per plan and event type",
    ("core.pyx", "for i in range(self.nsit):", 1): "TPStream's state(), for a snapshot",
}
_CALL = "(PyObject*)(&PyRange_Type), __pyx_callargs"
_MARK = re.compile(r"^ \* (.*?)\s+# <<<<<<<<<<<<<<$")


def _range_loops(c_file: Path) -> list[str]:
    """The source line of each range object the C builds."""
    found, current = [], ""
    for line in c_file.read_text().splitlines():
        m = _MARK.match(line)
        if m:
            current = m.group(1).strip()
        elif _CALL in line:
            found.append(current)
    return found


SOURCES = sorted(SRC.rglob("*.pyx"))


@pytest.mark.parametrize("pyx", SOURCES, ids=[str(p.relative_to(SRC)) for p in SOURCES])
def test_no_loop_of_the_engine_builds_a_range_object(pyx: Path) -> None:
    c_file = pyx.with_suffix(".c")
    assert c_file.exists(), f"{c_file} missing: build in place first (scripts/setup.sh)"
    found = Counter(_range_loops(c_file))
    slow = {line: n for line, n in found.items() if (pyx.name, line, n) not in ALLOWED}
    assert not slow, f"{pyx.name}: Python range objects (declare the index cdef int): {slow}"


def test_the_check_finds_an_undeclared_index(tmp_path: Path) -> None:
    """What the check reads, as Cython writes it for `for i in range(b)`
    with `i` undeclared (from vm.c at 22681d5)."""
    c_file = tmp_path / "vm.c"
    c_file.write_text(
        " *             for i in range(b):             # <<<<<<<<<<<<<<\n"
        "        __pyx_t_8 = __Pyx_PyObject_FastCall("
        "(PyObject*)(&PyRange_Type), __pyx_callargs+__pyx_t_11, 2);\n")
    assert _range_loops(c_file) == ["for i in range(b):"]
