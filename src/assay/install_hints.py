"""What to type when a package assay, or an agent it runs, needs is missing.

Every hint for assay's own parts names both commands a user may need: the
one for an install from the package index and the one for an editable
install from a clone, because ``pip install 'assay[postgres]'`` means
nothing inside a clone and ``pip install -e '.[postgres]'`` nothing outside
one.
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


#: The package to install for a module an agent imports, where their names differ or
#: where the framework is common enough to name (``assay init --framework``'s, and more).
_AGENT_PACKAGES = {
    "agents": "openai-agents",
    "langgraph": "langgraph",
    "langchain_openai": "langchain-openai",
    "langchain_anthropic": "langchain-anthropic",
    "langchain_core": "langchain-core",
    "pydantic_ai": "pydantic-ai",
    "anthropic": "anthropic",
    "openai": "openai",
    "google.genai": "google-genai",
    "google": "google-genai",
    "crewai": "crewai",
    "smolagents": "smolagents",
    "google.adk": "google-adk",
}


def agent_module(module: str, python: str) -> str:
    """A python: agent imports ``module``, which is not installed where assay runs.

    The agent is imported into assay's own process, so its framework must be
    installed in the Python that runs assay (``python``), which a user who
    installed assay with pipx or in another venv may not expect.
    """
    package = _AGENT_PACKAGES.get(module) or _AGENT_PACKAGES.get(module.split(".")[0])
    install = f"pip install {package}" if package else \
        f"pip install the package that provides {module.split('.')[0]}"
    return (f"the agent imports {module}, which is not installed in the Python assay runs in "
            f"({python}); a python: agent runs inside assay, so install it there "
            f"({install}), or run the agent as a program (exec:python …) with its own Python")
