"""Discovery and loading of suites, YAML and Python, with file:line errors (SPEC §2)."""

from .discover import discover, find_suite_files, is_suite_file
from .hidden import private_folder
from .loader import LoadedSuite, load_suite_file

__all__ = [
    "LoadedSuite",
    "discover",
    "find_suite_files",
    "is_suite_file",
    "load_suite_file",
    "private_folder",
]
