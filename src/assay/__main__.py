"""``python -m assay``."""

from .cli import main

main()
