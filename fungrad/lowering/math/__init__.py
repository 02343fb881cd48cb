"""Vectorisable math functions (exp, log, sin, erf, ...) written once, rendered per backend.

- ``builder``: the interface the algorithms are written against (``Value``, ``Builder``) and
  the float types;
- ``numeric``: shared helpers (multi-part constants, error-free transformations, polynomials);
- ``exp_log``, ``trig``, ``special``: the algorithms by family; ``functions``: the registry
  (name -> arity, emitter) and the accuracy contract;
- ``llvm``: the LLVM builder and the CPU's prelude (``prelude``, ``math_symbol``,
  ``MATH_FUNCTIONS``, the large-argument library, the exact division helper);
- ``wgsl``: the WGSL builder (``function``, ``inline``); ``gpu_float32``: the float32
  formulations the GPU uses in place of a few shared algorithms.
"""
