"""(being written) fungrad.numpy: ufuncs."""

__all__: list[str] = []
