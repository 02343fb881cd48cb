"""(being written) fungrad.random."""
