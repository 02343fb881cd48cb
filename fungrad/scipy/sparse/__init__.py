"""``fungrad.scipy.sparse``: jax.scipy.sparse's matrix-free solvers (:mod:`.linalg`)."""

from fungrad.scipy.sparse import linalg  # noqa: F401
