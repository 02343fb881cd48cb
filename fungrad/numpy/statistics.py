"""(being written) fungrad.numpy: statistics."""

__all__: list[str] = []
