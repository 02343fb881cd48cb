"""(being written) fungrad.numpy: creation."""

__all__: list[str] = []
