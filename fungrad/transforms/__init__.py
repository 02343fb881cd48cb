"""Transforms: functions from jaxprs (or traced Python functions) to jaxprs.

Per-primitive rules never live in this package: they sit beside each primitive in
``fungrad.lax``, which imports the rule tables from here. The transforms sit below lax and do
not import it (``.importlinter``); the few lax operations they apply come through
``array_ops``, which lax fills when it is imported.

* ``staging``: trace a Python function into a jaxpr; ``trace_body`` / ``hoist_tracer_consts``
  for the bodies of higher-order primitives.
* ``jvp``, ``partial_eval``, ``transpose``, ``vmap``: the machinery and rule tables of forward
  mode, partial evaluation (linearize), the backward pass and batching.
* ``tape`` (eager reverse mode, ``grad`` outside ``jit``) and ``pycodegen`` (a jaxpr of
  first-order primitives as a generated Python function, which the tape runs).
* ``autodiff`` (``jvp``, ``vjp``, ``grad``, jacobians, ``linear_transpose``), ``vmap_api``
  (``vmap``), ``custom`` (``custom_jvp``/``custom_vjp``), ``remat`` (``checkpoint``).
* ``jit`` (the public function and its hot paths), ``jit_cache`` (argument handling, the
  per-function cache, retrace explanations), ``jit_primitive`` (``jit_p`` and its rules),
  ``aot`` (``Lowered``/``Compiled``), ``memo`` (``Once``, ``JaxprMemo``).
* ``api_util``: what the front ends share (callable checks, function names, argnums).
* ``array_ops``: the lax operations the transforms apply, registered by lax.
"""
