"""``fungrad.errors``: the exceptions of tracing, under jax.errors' names, so that programs
which catch them (``except jax.errors.TracerBoolConversionError``) run unchanged.

The hierarchy is JAX's: every tracing error is a ``TypeError`` (``JAXTypeError``), a traced
boolean mask used as an index an ``IndexError`` (``JAXIndexError``); ``bool()`` of a tracer is
a ``ConcretizationTypeError``, a tracer used as a Python integer index or size is not. Each
message says what was traced and how to fix the program.

Not here: ``KeyReuseError`` (fungrad has no key-reuse checker), ``JaxRuntimeError`` (fungrad's
compiled code reports failures as Python exceptions of their own kind) and
``InconclusiveDimensionOperation`` (no symbolic shapes).
"""

from fungrad.core import (
    ConcretizationTypeError,
    FungradIndexError,
    FungradTypeError,
    JaxprTypeError,
    NonConcreteBooleanIndexError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnexpectedTracerError,
)

JAXTypeError = FungradTypeError
JAXIndexError = FungradIndexError

__all__ = [
    "ConcretizationTypeError",
    "JAXIndexError",
    "JAXTypeError",
    "JaxprTypeError",
    "NonConcreteBooleanIndexError",
    "TracerArrayConversionError",
    "TracerBoolConversionError",
    "TracerIntegerConversionError",
    "UnexpectedTracerError",
]
