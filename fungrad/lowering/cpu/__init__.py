"""The CPU backend: kernels rendered as LLVM IR, compiled through llvmlite's LLVM, run natively.

``llvm`` renders a fusion Program (``llvm_ops`` holds each kernel op's IR), ``compiler`` turns IR
text into native functions (``llvm_capi`` binds the few LLVM C functions used, ``cache`` keeps
objects on disk), ``executable`` is the compiled program's call path (``abi`` reads argument
pointers natively), ``runtime``/``threads`` spread loops over cores, ``gemm`` is the float32
matmul library and ``blas`` calls numpy's bundled OpenBLAS.
"""
