"""Passes over jaxprs: dead-code and common-subexpression elimination, inlining of calls,
constant folding, algebraic simplification, and ``optimize`` (the compiler's pipeline)."""
