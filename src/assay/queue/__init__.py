"""Batteries on a PostgreSQL job queue (SPEC §12, docs/decisions/0048-queue.md).

``assay run --executor queue`` registers a battery with its chunks of
trials as jobs of procrastinate's queue in the store's own database
(``submit``, ``enqueue``); ``assay worker`` processes claim them, run them
with the local executor's battery and record each trial once, fenced by
their job (``worker``, ``work``, ``fence``); a stopped worker's chunks are
taken back after a lease (``leases``); the last chunk enqueues the seal
(``sealing``); anyone follows a run from the store (``follow``).

Nothing here is imported by ``assay --help`` or a local run: procrastinate
loads only when the queue is used.
"""
