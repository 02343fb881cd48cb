"""``jax.extend.source_info_util``: where traced equations come from.

fungrad records on each equation the first frame outside its own files (fungrad/source_info.py);
:func:`register_exclusion` adds a library's files to those skipped, so equations made inside
the library name the user's line that called it."""

from fungrad.source_info import register_exclusion

__all__ = ["register_exclusion"]
