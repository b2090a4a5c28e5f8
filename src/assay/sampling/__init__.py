"""Online evaluation (SPEC §10): a seeded share of production calls recorded and graded
off the hot path with a suite's reference-free checks, failures queued for a person.

``online`` is ``assay.online(...)``, the decorator (and ``.asgi(app)``, the middleware
in ``asgi``); ``buffer`` holds the seeded draw and the bounded buffer one thread grades;
``samples`` turns a recorded call into a trace; ``reference_free`` chooses the checks
that need no reference; ``proxy`` (with its pure core ``proxy_calls``) does the same
between an MCP host and an MCP server (``assay proxy``). The room is not called
``online/``: ``assay.online`` is the public function, and a subpackage of that name
would replace it on the package once imported (docs/decisions/0057-one-house.md).
"""
