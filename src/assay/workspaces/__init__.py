"""Workspaces (SPEC §14): a fresh copy of a case's folder per trial, and what the agent
changed in it.

``copy`` makes the copy cheaply (a copy-on-write clone where the file system
offers one, a parallel copy where not; never a hard link an agent could write
through). ``staged`` holds one trial's workspace: staged from its source, its
change set taken after the agent (``model.changes.ChangeSet``), removed after
grading, and swept by a later run when the process that staged it died. The
engine will stage and collect; checks read the change set from the trace and
never the disk.
"""

from __future__ import annotations

from .staged import Workspace, stage, sweep

__all__ = ["Workspace", "stage", "sweep"]
