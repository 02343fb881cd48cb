"""Passes over jaxprs (dead-code elimination, common-subexpression elimination)."""
