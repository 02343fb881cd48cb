"""(being written) fungrad.numpy: indexing."""

__all__: list[str] = []
