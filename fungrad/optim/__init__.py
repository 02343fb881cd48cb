"""``fungrad.optim``: optax's gradient transformations and optimizers, on fungrad.

    import fungrad.optim as optim

    opt = optim.adam(1e-3)
    opt_state = opt.init(params)

    @fg.jit
    def step(params, opt_state, batch):
        grads = fg.grad(loss)(params, batch)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state

Names, signatures, defaults and update rules are optax's. The protocol lives in
:mod:`fungrad.optim.base`; the building blocks in :mod:`fungrad.optim.transforms` (moment
rescalings, momentum, step sizes), :mod:`fungrad.optim.constraints` (clipping, weight decay,
noise) and :mod:`fungrad.optim.factorized` (Adafactor's moments); the optimizers (chains of
those) in :mod:`fungrad.optim.alias`.
"""

from fungrad.optim._numerics import (
    safe_increment,
    safe_int32_increment,
    safe_norm,
    safe_root_mean_squares,
)
from fungrad.optim.alias import *  # noqa: F401,F403
from fungrad.optim.alias import __all__ as _alias_all
from fungrad.optim.base import *  # noqa: F401,F403
from fungrad.optim.base import __all__ as _base_all
from fungrad.optim.constraints import *  # noqa: F401,F403
from fungrad.optim.constraints import __all__ as _constraints_all
from fungrad.optim.factorized import *  # noqa: F401,F403
from fungrad.optim.factorized import __all__ as _factorized_all
from fungrad.optim.transforms import *  # noqa: F401,F403
from fungrad.optim.transforms import __all__ as _transforms_all

__all__ = [
    *_base_all,
    *_transforms_all,
    *_constraints_all,
    *_factorized_all,
    *_alias_all,
    "safe_increment",
    "safe_int32_increment",
    "safe_norm",
    "safe_root_mean_squares",
]

# --- schedules and wrappers (fungrad.optim.schedules, fungrad.optim.wrappers) ---
from fungrad.optim.schedules import *  # noqa: E402,F401,F403
from fungrad.optim.schedules import __all__ as _schedules_all  # noqa: E402
from fungrad.optim.wrappers import *  # noqa: E402,F401,F403
from fungrad.optim.wrappers import __all__ as _wrappers_all  # noqa: E402

__all__ += [*_schedules_all, *_wrappers_all]
