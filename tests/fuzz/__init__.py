"""A differential fuzz test of fungrad (issue 15).

Random programs over the primitive set and ``fungrad.numpy`` are drawn as data
(:mod:`tests.fuzz.program`), run eagerly (the numpy reference, in float32 and again in float64 as
a shadow that measures how sensitive each result is to rounding), jitted on the CPU and the GPU,
under ``grad`` and under ``vmap`` (:mod:`tests.fuzz.check`), and a failing program is shrunk
(:mod:`tests.fuzz.reduce`) and printed as a standalone script. ``docs/fuzzing.md`` says how to
run it and what is compared.
"""
