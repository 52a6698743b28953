"""Model errors: one subclass of ModelError per kind of mistake. Each carries
the position, what was found and what was expected, and renders the source
line with a caret (ModelError.render)."""

from __future__ import annotations

from caesar.errors import ModelError, SourcePosition


class LanguageError(ModelError):
    """Base of the language package's errors."""

    def __init__(self, message: str, position: SourcePosition | None = None,
                 source: str | None = None, found: str | None = None,
                 expected: str | None = None) -> None:
        self.found = found
        self.expected = expected
        if found is not None or expected is not None:
            parts = [message]
            if found is not None:
                parts.append(f"found {found}")
            if expected is not None:
                parts.append(f"expected {expected}")
            message = "; ".join(parts)
        line = None
        if source is not None and position is not None and position.line >= 1:
            lines = source.splitlines()
            if position.line <= len(lines):
                line = lines[position.line - 1].expandtabs(1)
        super().__init__(message, position, line)


class ModelSyntaxError(LanguageError):
    """The text does not follow the grammar."""


class DuplicateNameError(LanguageError):
    """An event type, attribute, context, variable or output field is defined twice."""


class UnknownNameError(LanguageError):
    """A reference to an event type, attribute, variable or context that does not exist."""


class ModelTypeError(LanguageError):
    """An expression combines values of incompatible types."""


class PatternError(LanguageError):
    """A pattern is not executable as written (negation placement, predicates
    on negated variables that cannot be separated, Kleene misuse)."""


class WindowError(LanguageError):
    """A WITHIN or WINDOW duration is not positive or not expressible in ticks."""


class SchemaMismatchError(LanguageError):
    """An event declaration disagrees with its Avro schema or with another
    declaration of the same derived type."""


class ModelStructureError(LanguageError):
    """Model-level rules: default context, cycles between derived types,
    contexts and their queries."""


class TableError(LanguageError):
    """A shared table, a table read or a rule action breaks a table's schema
    or key (ACEP; src/caesar/language/tables_checks.py)."""


class ReservedFeatureError(LanguageError):
    """A reserved keyword for a planned feature (SITUATION, RULE, TABLE)."""
