"""What to type when a package assay needs is missing.

Every hint names both commands a user may need: the one for an install from
the package index and the one for an editable install from a clone, because
``pip install 'assay[postgres]'`` means nothing inside a clone and
``pip install -e '.[postgres]'`` nothing outside one.
"""

from __future__ import annotations


def reinstall(package: str) -> str:
    """A core dependency is missing: the install is broken, so say how to repair it."""
    return (f"the {package} package is missing although assay depends on it; reinstall "
            "assay: pip install --force-reinstall assay (from a clone: pip install -e .)")


def extra(name: str, package: str) -> str:
    """An optional part needs its extra: the command from the index and from a clone."""
    return (f"the {package} package is not installed; install assay with the {name} extra: "
            f"pip install 'assay[{name}]' (from a clone: pip install -e '.[{name}]')")
