"""(being written) fungrad.numpy: reductions."""

__all__: list[str] = []
