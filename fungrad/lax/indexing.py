"""(being written) lax primitives: indexing."""

__all__: list[str] = []
