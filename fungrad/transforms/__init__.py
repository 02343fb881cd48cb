"""Transforms: functions from jaxprs (or traced Python functions) to jaxprs.

``staging`` traces a Python function into a jaxpr (used by ``make_jaxpr``). The autodiff,
batching and jit machinery land here as they are built; per-primitive rules never live in
this package (they sit beside each primitive in ``fungrad.lax``).
"""
