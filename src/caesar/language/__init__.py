"""The CAESAR language: parser, semantic checks, phases 1 and 2, optimizer,
physical planning and explain.

    parse(text, file)        -> Model AST (positions on every node)
    compile_phases(text)     -> Compilation (query set, unoptimized and
                                optimized algebra plans, execution plans)
    compile_model(text|path) -> ExecutionPlan (optimized)

Every failure on user input is a caesar.errors.ModelError subclass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from caesar.errors import CaesarError, ModelError, SourcePosition
from caesar.language.algebra import AlgebraPlan, phase2
from caesar.language.ast import Model
from caesar.language.errors import LanguageError, ModelStructureError
from caesar.language.imports import import_from_deriver
from caesar.language.independent import context_independent
from caesar.language.optimizer import RULES, Rule, optimize
from caesar.language.parser import parse
from caesar.language.phase1 import QuerySet, query_set
from caesar.language.physical import physical_plan
from caesar.language.semantics import check
from caesar.language.tables_checks import check_tables, split_tables
from caesar.plans.execution import ExecutionPlan
from caesar.plans.functions import Function
from caesar.plans.tables import AcepPlan

__all__ = ["Compilation", "compile_model", "compile_phases", "parse", "RULES", "LanguageError"]


@dataclass(frozen=True)
class Compilation:
    query_set: QuerySet
    unoptimized: AlgebraPlan
    optimized: AlgebraPlan
    execution: ExecutionPlan = field(repr=False)
    acep: AcepPlan | None = field(default=None, repr=False)

    def unoptimized_execution(self) -> ExecutionPlan:
        """The execution plan of the unoptimized algebra plan (for equivalence tests)."""
        return replace(physical_plan(self.unoptimized), acep=self.acep)


def _read(text_or_path: str | Path, file: str | None) -> tuple[str, str]:
    if isinstance(text_or_path, Path) or (
            isinstance(text_or_path, str) and "\n" not in text_or_path
            and text_or_path.endswith(".caesar")):
        path = Path(text_or_path)
        try:
            return path.read_text(encoding="utf-8"), file or str(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"cannot read model file {path}: {exc}",
                             SourcePosition(str(path), 1, 1)) from None
    return text_or_path, file or "<model>"


def compile_phases(text_or_path: str | Path, file: str | None = None,
                   rules: Sequence[tuple[str, Rule]] = RULES,
                   functions: Mapping[str, Function] | None = None,
                   import_derived: bool = True) -> Compilation:
    """`functions`: the user-defined functions the model may call (by name).
    `import_derived=False`: the matcher derives again what the deriver derives
    for it (language/imports.py; the baseline of that step)."""
    text, name = _read(text_or_path, file)
    parsed = parse(text, name)
    try:
        model, tables = split_tables(parsed)
        checked = check(model, functions)
        acep = check_tables(tables, checked) if tables is not None else None
        qs = query_set(checked)
        unoptimized = phase2(qs)
        optimized = optimize(unoptimized, rules)
        used = tuple(f for f in (functions or {}).values() if f.name in checked.functions_used)
        execution = replace(physical_plan(optimized), acep=acep, functions=used)
        if import_derived:
            execution = import_from_deriver(execution)
        return Compilation(qs, unoptimized, optimized, execution, acep)
    except CaesarError:
        raise
    except RecursionError:
        raise ModelStructureError("the model nests too deeply to compile",
                                  SourcePosition(name, 1, 1)) from None


def compile_model(text_or_path: str | Path, file: str | None = None, *,
                  context_aware: bool = True,
                  functions: Mapping[str, Function] | None = None,
                  import_derived: bool = True) -> ExecutionPlan:
    """context_aware=False: the context-independent baseline (every query runs
    all the time, its context an output filter; src/caesar/language/independent.py).
    import_derived=False: the matcher derives again what the deriver derives
    for it (src/caesar/language/imports.py)."""
    plan = compile_phases(text_or_path, file, functions=functions,
                          import_derived=import_derived).execution
    return plan if context_aware else context_independent(plan)


__all__ += ["Model", "ModelError"]
