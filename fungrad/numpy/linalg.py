"""(being written) fungrad.numpy: linalg."""

__all__: list[str] = []
