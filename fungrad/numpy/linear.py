"""(being written) fungrad.numpy: linear."""

__all__: list[str] = []
