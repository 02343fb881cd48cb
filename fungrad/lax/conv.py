"""(being written) lax primitives: conv."""

__all__: list[str] = []
