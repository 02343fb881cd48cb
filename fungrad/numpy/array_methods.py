"""(being written) operators and methods of Array and Tracer."""


def install() -> None:
    """Install operators and methods on Array and Tracer (being written)."""
