"""Host CLIs (``claude``, ``codex``) run natively, their JSON event streams read into traces."""
