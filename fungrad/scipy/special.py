"""(being written) fungrad.scipy.special."""
