"""Lowering of jaxprs to native code.

Today this package holds the CPU compiler's foundations, each tested on its own: ``cpu``
(LLVM IR text -> native functions through llvmlite), ``cache`` (the on-disk object cache),
``threads`` (``parallel_for``), ``blas`` (numpy's OpenBLAS callable from generated code) and
``llvm_math`` (vectorisable math functions in IR). The kernel-op set, the fusion planner, the
LLVM and WGSL renderers and ``jit`` itself come with issues 4 and 5; nothing in fungrad calls
this package yet.
"""
