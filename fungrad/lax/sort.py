"""(being written) lax primitives: sort."""

__all__: list[str] = []
