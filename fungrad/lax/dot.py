"""(being written) lax primitives: dot."""

__all__: list[str] = []
