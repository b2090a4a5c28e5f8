"""A tool fixture: the tools an agent is given, with canned results, or MCP servers (SPEC §4)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from ..mcp_uri import parse_mcp_uri


def _mcp_uri(uri: str) -> str:
    parse_mcp_uri(uri)  # ValueError: the reason, placed at the entry's line
    return uri


#: An MCP server whose tools a model is offered (``mcp+stdio:…``, ``mcp+http(s)://…``).
McpUri = Annotated[str, AfterValidator(_mcp_uri)]


class WhenResult(BaseModel):
    """One entry of ``results``: the result given when the arguments match ``when``."""

    model_config = ConfigDict(extra="forbid")

    when: dict[str, Any] | None = None
    result: Any = None


class FixtureTool(BaseModel):
    """One tool: its declaration and where its result comes from."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    result: Any = None
    results: list[WhenResult] | None = None
    handler: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> FixtureTool:
        given = [k for k in ("results", "handler") if getattr(self, k) is not None]
        if self.result is not None:
            given.append("result")
        if len(given) > 1:
            raise ValueError(f"tool {self.name!r} gives {' and '.join(given)}; give one")
        return self


class ToolFixture(BaseModel):
    """A fixture file: tools, MCP servers whose tools are offered too, and the answers to asks."""

    model_config = ConfigDict(extra="forbid")

    tools: list[FixtureTool] = Field(default_factory=list)
    mcp: list[McpUri] = Field(default_factory=list)
    answers: dict[str, Any] = Field(default_factory=dict)
    #: The world the tools act on (SPEC §14): a JSON/YAML document (the loader reads a
    #: file named here). Each trial starts from its own copy; a handler with a second
    #: parameter gets it and may change it; the final state goes into the trace.
    state: Any = None

    @property
    def has_state(self) -> bool:
        """Whether the fixture gives a state (``state: null`` is one too)."""
        return "state" in self.model_fields_set

    def tool(self, name: str) -> FixtureTool | None:
        """The tool called ``name``, if the fixture declares it."""
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None
