"""(being written) lax primitives: random_bits."""

__all__: list[str] = []
