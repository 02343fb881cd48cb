"""(being written) fungrad.nn."""
