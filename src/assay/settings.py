"""Settings in a file: ``[tool.assay]`` in ``pyproject.toml``, or ``assay.toml`` (SPEC §13).

A project says once where its store is, who judges, where its model
servers and hidden cases are, and how many trials at once, instead of on
every command. The file closest to the working folder wins (``assay.toml``
before ``pyproject.toml`` in one folder; a ``pyproject.toml`` without
``[tool.assay]`` is passed over). What a flag says wins over everything,
then the environment variable, then the file, then assay's default: the
file's values become the commands' defaults (click's ``default_map``), and
a value is left out where its environment variable is set, so the variable
is read where it always was.

Paths in the file are relative to the file's folder: ``hidden_dir``, and a
SQLite ``db`` (``sqlite:///relative.db``). A bad file is a usage error that
names the file, the line where there is one, and what is wrong.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError

#: The settings a file may hold: (environment variable or None, the commands' parameter
#: names that take it, the value's kind).
KEYS: dict[str, tuple[str | None, tuple[str, ...], type]] = {
    "db": ("ASSAY_DB", ("db",), str),
    "judge": ("ASSAY_JUDGE", ("judge", "judge_uri"), str),
    "judge_base_url": ("ASSAY_JUDGE_BASE_URL", ("judge_base_url",), str),
    "user_model": ("ASSAY_USER_MODEL", ("user_model",), str),
    "base_url": ("ASSAY_OPENAI_BASE_URL", ("base_url",), str),
    "upstream_openai": ("ASSAY_UPSTREAM_OPENAI", ("upstream_openai",), str),
    "upstream_anthropic": ("ASSAY_UPSTREAM_ANTHROPIC", ("upstream_anthropic",), str),
    "upstream_gemini": ("ASSAY_UPSTREAM_GEMINI", ("upstream_gemini",), str),
    "otel": (None, ("otel",), bool),
    "hidden_dir": ("ASSAY_HIDDEN_DIR", ("hidden_dir",), str),
    "concurrency": (None, ("concurrency",), int),
    "trials": (None, ("trials",), int),
}

#: Commands whose parameter of that name means something else (``assay judges --judge``
#: names the judge whose calibration to show, not who judges).
_NOT_THE_SETTING = {("judges", "judge")}


@dataclass(frozen=True)
class Setting:
    """One setting's effective value and where it came from."""

    key: str
    value: Any
    source: str


@dataclass(frozen=True)
class Settings:
    """The file's settings (``path`` None: no file), already checked."""

    path: Path | None
    values: dict[str, Any]
    lines: dict[str, int]

    def effective(self, environ: Mapping[str, str] | None = None) -> list[Setting]:
        """Each setting as a command without flags gets it: environment, file, or default."""
        environ = os.environ if environ is None else environ
        found = []
        for key, (variable, _, _) in KEYS.items():
            if variable is not None and environ.get(variable):
                found.append(Setting(key, environ[variable], f"environment ${variable}"))
            elif key in self.values and self.path is not None:
                where = f"{self.path}:{self.lines[key]}" if key in self.lines else str(self.path)
                found.append(Setting(key, self.values[key], where))
            else:
                found.append(Setting(key, None, "default"))
        return found


def find(start: Path | None = None) -> Path | None:
    """The settings file closest to ``start`` (default: the working folder), or None."""
    folder = (start or Path.cwd()).resolve()
    for place in (folder, *folder.parents):
        own = place / "assay.toml"
        if own.is_file():
            return own
        project = place / "pyproject.toml"
        if project.is_file() and _has_section(project):
            return project
    return None


def _has_section(path: Path) -> bool:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True  # a broken pyproject.toml is reported, not passed over
    return isinstance(data.get("tool"), dict) and "assay" in data["tool"]


def load(path: Path | None = None) -> Settings:
    """The settings of ``path`` (default: ``find()``); ``UsageError`` for a bad file."""
    path = path if path is not None else find()
    if path is None:
        return Settings(None, {}, {})
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: cannot read the settings file: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path}: not valid TOML: {error}") from None
    if path.name == "pyproject.toml":
        tool = data.get("tool")
        table = tool.get("assay") if isinstance(tool, dict) else None
        section = "[tool.assay]"
    else:
        table, section = data, "assay.toml"
    if not isinstance(table, dict):
        raise UsageError(f"{path}: {section} is not a table of settings")
    lines = _key_lines(text, table)
    values: dict[str, Any] = {}
    for key, value in table.items():
        at = f"{path}:{lines[key]}" if key in lines else str(path)
        if key not in KEYS:
            raise UsageError(f"{at}: unknown setting {key!r} in {section}; the settings are "
                             f"{', '.join(KEYS)}")
        kind = KEYS[key][2]
        if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{at}: {key} is a whole number of at least 1, not {value!r}")
        if kind is bool and not isinstance(value, bool):
            raise UsageError(f"{at}: {key} is true or false, not {value!r}")
        if kind is str and (not isinstance(value, str) or not value.strip()):
            raise UsageError(f"{at}: {key} is a non-empty string, not {value!r}")
        values[key] = _resolved(key, value, path.parent)
    return Settings(path, values, lines)


def _resolved(key: str, value: Any, folder: Path) -> Any:
    """Paths relative to the file's folder: the hidden folder, a SQLite store's file."""
    if key == "hidden_dir" and not Path(value).expanduser().is_absolute():
        return str(folder / value)
    if key == "db" and value.startswith("sqlite:///") and not value.startswith("sqlite:////"):
        rest = value.removeprefix("sqlite:///")
        if rest and rest != ":memory:" and not Path(rest).is_absolute():
            return f"sqlite:///{folder / rest}"
    return value


def _key_lines(text: str, table: Mapping[str, Any]) -> dict[str, int]:
    """The line of each key's assignment (tomllib gives none): the first line it starts."""
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        name = line.split("=", 1)[0].strip().strip('"').strip("'")
        if "=" in line and name in table and name not in lines:
            lines[name] = number
    return lines


def default_map(settings: Settings, group: Any,
                environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Click's ``default_map`` for ``group``: each command's parameters the file sets.

    A setting whose environment variable is set is left out: the variable
    wins, and is read where it always was.
    """
    environ = os.environ if environ is None else environ
    chosen = {}
    for key, value in settings.values.items():
        variable = KEYS[key][0]
        if variable is None or not environ.get(variable):
            chosen[key] = value
    if not chosen:
        return {}
    return _for(group, chosen) or {}


def _for(command: Any, chosen: dict[str, Any]) -> dict[str, Any] | None:
    found: dict[str, Any] = {}
    for name, sub in (getattr(command, "commands", None) or {}).items():
        params = {p.name for p in getattr(sub, "params", [])}
        own = {param: value for key, value in chosen.items() for param in KEYS[key][1]
               if param in params and (name, param) not in _NOT_THE_SETTING}
        nested = _for(sub, chosen)
        if nested:
            own.update(nested)
        if own:
            found[name] = own
    return found or None
