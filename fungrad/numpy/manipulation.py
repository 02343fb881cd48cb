"""(being written) fungrad.numpy: manipulation."""

__all__: list[str] = []
