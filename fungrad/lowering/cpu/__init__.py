"""The CPU backend: kernels rendered as LLVM IR, compiled through llvmlite's LLVM, run natively.

``llvm`` renders a fusion Program as LLVM modules: the entry point, and each step through its
step table: ``kernel`` writes a kernel's function (a ``render.KernelRenderer``; ``llvm_ops``
holds each kernel op's IR, ``llvm_types`` the types and literals), ``gemm_step`` renders the
products, ``control_flow``, ``sort`` and ``host_call`` the steps of ``lowering/steps.py``.
``compiler`` turns IR text into native functions (``llvm_capi`` binds the few LLVM C
functions used, ``cache`` keeps objects on disk), ``executable`` is the compiled program's
call path (``abi`` reads argument pointers natively), ``runtime``/``threads`` spread loops
over cores, ``gemm`` is the float32 matmul library, ``blas`` calls numpy's bundled OpenBLAS
and ``policy`` holds the CPU's planning choices.
"""
