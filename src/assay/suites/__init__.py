"""Discovery and loading of suites, YAML and Python, with file:line errors (SPEC §2)."""

from .discover import Survey, discover, find_suite_files, is_suite_file, survey
from .hidden import private_folder
from .loader import LoadedSuite, load_suite_file

__all__ = [
    "LoadedSuite",
    "Survey",
    "discover",
    "find_suite_files",
    "is_suite_file",
    "load_suite_file",
    "private_folder",
    "survey",
]
