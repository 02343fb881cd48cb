"""(being written) fungrad.numpy: sorting."""

__all__: list[str] = []
