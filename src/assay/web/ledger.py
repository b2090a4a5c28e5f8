"""The ledger: does it hold, its newest signed tree head, its entries, a run's receipt.

Verification says what ``assay ledger verify`` says, without making a page
wait for it: the whole ledger (every entry, content and head:
``store.ledger.verified.verify_all``) is read in a process of its own, the first
time the page is asked for and whenever "Verify the whole ledger again" is
pressed, while the page says it is checking and asks every second (htmx);
every other view checks only the entries and heads stored since
(``verify_new``), which costs what was appended, not the ledger's size. The
page says when each was done: an entry edited after the whole ledger was
read is found by reading it whole again. A ledger that does not hold is
reported with the first bad entry named, and stays so until read again.

A run's receipt (``/ledger/receipts/RUN``) is what ``assay receipt RUN``
writes: built from the store (``store.ledger.run_receipts``), signed with the
store's key beside it, checked before it is handed out. It holds the
redacted summary only, so no hidden case.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from .render import BadRequest, NotFound, is_api, respond

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from fastapi import FastAPI

    from ..store.database import Store
    from ..store.ledger.verified import Verified
    from .bench import Workbench

router = APIRouter()
log = logging.getLogger("assay.web")

PAGE_SIZE = 50


class LedgerWatch:
    """The server's memory of the ledger's last check: one per app.

    The whole ledger is read in a process of its own (the first view, or
    "verify again"; a thread for an in-memory store, which no other process
    can open), so that no page waits for it, nor for the interpreter lock
    its hashing would hold: meanwhile the page says it is checking, and asks
    every second. Other views extend the last result over what is new
    (``verify_new``), one at a time.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.verified: Verified | None = None
        #: When the whole check under way started (None: none is).
        self.checking_since: str | None = None
        #: Why the last whole check could not run (an error's type, never its message).
        self.error: str | None = None
        #: Until a whole check has verified one, the tree receipts are proved from.
        self.tree: list[list[bytes]] | None = None
        self.tree_lock = threading.Lock()

    def look(self, store: Store, public_key: Ed25519PublicKey | None
             ) -> tuple[Verified | None, str | None]:
        """The ledger as last checked, brought up to date; and since when a whole check runs."""
        from ..store.ledger.verified import verify_new

        with self.lock:
            if self.checking_since is None:
                if self.verified is None:
                    self._start(store, public_key)
                else:
                    self.verified = verify_new(store, self.verified, public_key)
            return self.verified, self.checking_since

    def again(self, store: Store, public_key: Ed25519PublicKey | None) -> None:
        """Read the whole ledger again (unless a whole check is under way already)."""
        with self.lock:
            if self.checking_since is None:
                self._start(store, public_key)

    def _start(self, store: Store, public_key: Ed25519PublicKey | None) -> None:
        """Start a whole check (the lock is held)."""
        from ..store.ledger.entries import utc_stamp

        self.checking_since = utc_stamp()
        url = store.engine.url
        if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
            target = self._in_thread(store, public_key)
        else:
            target = self._in_process(url.render_as_string(hide_password=False), public_key)
        threading.Thread(target=target, name="assay-ledger-verify", daemon=True).start()

    def _in_process(self, url: str, public_key: Ed25519PublicKey | None
                    ) -> Callable[[], None]:
        import multiprocessing

        from ..store.ledger.heads import raw_public_key
        from ..store.ledger.verified import verify_all_sent

        context = multiprocessing.get_context("spawn")  # the server has threads: no fork
        receiving, sending = context.Pipe(duplex=False)
        raw = None if public_key is None else raw_public_key(public_key)
        process = context.Process(target=verify_all_sent, args=(sending, url, raw),
                                  name="assay-ledger-verify", daemon=True)
        process.start()
        sending.close()

        def wait() -> None:
            try:
                kind, value = receiving.recv()
            except (EOFError, OSError):
                kind, value = "error", "the verifying process ended without an answer"
            finally:
                receiving.close()
                process.join()
            self._done(value if kind == "ok" else None, None if kind == "ok" else str(value))

        return wait

    def _in_thread(self, store: Store, public_key: Ed25519PublicKey | None
                   ) -> Callable[[], None]:
        from ..store.ledger.verified import verify_all

        def whole() -> None:
            try:
                found = verify_all(store, public_key)
            except Exception as failure:  # its message may quote a stored row: only its type
                self._done(None, type(failure).__name__)
            else:
                self._done(found, None)

        return whole

    def receipt_tree(self, store: Store) -> list[list[bytes]] | None:
        """A Merkle tree of the ledger's entries to read receipts' proofs off.

        The verified one when there is one; else one built from the stored
        hashes on first use and extended by what came since. The latter is
        not verified, and need not be: a receipt is checked against its
        signed head before it is handed out, and built afresh if that fails
        (``run_receipts.issue``).
        """
        from ..store.ledger import merkle
        from ..store.ledger.entries import entry_hashes

        verified = self.verified
        if verified is not None and verified.ok and verified.tree is not None:
            return verified.tree
        with self.tree_lock:
            tree = self.tree if self.tree is not None else [[]]
            with store.engine.connect() as connection:
                hashes = entry_hashes(connection, len(tree[0]))
            try:
                merkle.extend_levels(tree, [bytes.fromhex(h.removeprefix("sha256:"))
                                            for h in hashes])
            except ValueError:  # a malformed hash: no tree, the receipt is built afresh
                self.tree = None
                return None
            self.tree = tree
            return tree

    def _done(self, found: Verified | None, error: str | None) -> None:
        if error is not None:
            log.error("the ledger could not be verified: %s", error)
        with self.lock:
            self.verified = found if found is not None else self.verified
            self.error = error
            self.checking_since = None
        if found is not None and found.ok:
            self.tree = None  # receipts are proved from the verified tree from now on


_WATCHES = threading.Lock()


def watch(app: FastAPI) -> LedgerWatch:
    """``app``'s ledger watch, made on first use."""
    with _WATCHES:
        found = getattr(app.state, "ledger_watch", None)
        if found is None:
            found = app.state.ledger_watch = LedgerWatch()
        return found


@router.get("/ledger")
@router.get("/api/ledger")
def ledger_page(request: Request, page: int = Query(1, ge=1),
                at: int | None = Query(None, ge=0)) -> Response:
    """Whether the ledger holds, its newest head, and its entries newest first (a page)."""
    from ..store.ledger.listing import entries_page, ledger_size, newest_head

    bench = request.app.state.bench
    store = bench.open()
    checked = _verification(request.app, store, bench)
    size = ledger_size(store)
    pages = max(1, -(-size // PAGE_SIZE))
    if at is not None:  # the page that holds entry ``at``
        if at >= size:
            raise NotFound(f"no ledger entry {at}: the ledger has {size} entries")
        page = (size - 1 - at) // PAGE_SIZE + 1
    elif page > pages:
        raise NotFound(f"no page {page}: the ledger's entries fill {pages} page(s)")
    rows = entries_page(store, size, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    data = {
        "verification": checked,
        "head": _head(newest_head(store)),
        "entries": [row.as_json() for row in rows],
        "total": size, "page": page, "pages": pages, "at": at,
    }
    return respond(request, "ledger.html", data)


@router.get("/ledger/verification")
@router.get("/api/ledger/verification")
def verification_part(request: Request) -> Response:
    """The verification alone: the part htmx asks for while a whole check runs, else a page."""
    bench = request.app.state.bench
    checked = _verification(request.app, bench.open(), bench)
    template = ("ledger_verification.html" if request.headers.get("hx-request")
                else "ledger_verification_page.html")
    return respond(request, template, {"verification": checked})


@router.get("/ledger/verify")
def verify_form() -> Response:
    """Verifying again is a POST from the ledger page; a GET (a link followed) goes there."""
    return RedirectResponse("/ledger", status_code=303)


@router.post("/ledger/verify")
@router.post("/api/ledger/verify")
def verify_whole(request: Request) -> Response:
    """Read the whole ledger again (every entry, content and head), on its own thread."""
    bench = request.app.state.bench
    watch(request.app).again(bench.open(), _local_key(bench))
    if is_api(request):
        from fastapi.responses import JSONResponse

        checked = _verification(request.app, bench.open(), bench)
        return JSONResponse({"verification": checked}, status_code=202)
    return RedirectResponse("/ledger", status_code=303)


@router.get("/ledger/head.json")
def head_download(request: Request) -> Response:
    """The newest stored head as ``assay.head/1`` JSON (``assay ledger verify --head`` pins it)."""
    from ..store.ledger.heads import StoredHead, published
    from ..store.ledger.listing import newest_head

    head = newest_head(request.app.state.bench.open())
    if head is None:
        raise NotFound("the ledger has no signed tree head yet (a sealed run signs one)")
    parsed = StoredHead(head.size, head.root, head.signature, head.public_key, "").parsed()
    if parsed is None:
        raise BadRequest(f"the stored head of {head.size} entries is malformed "
                         "(see the ledger's verification)")
    return _download(published(*parsed), f"head-{head.size}.json")


@router.get("/ledger/receipts/{run_id}")
@router.get("/api/ledger/receipts/{run_id}")
def receipt_download(request: Request, run_id: str) -> Response:
    """The run's signed receipt, as ``assay receipt RUN`` writes it (a download)."""
    from ..errors import UsageError
    from ..store.ledger.keys import signing_key
    from ..store.ledger.run_receipts import ReceiptDoesNotHold, issue
    from .stored import run_row

    bench = request.app.state.bench
    store = bench.open()
    run_row(store, run_id)  # no such run: 404 naming it
    # A tree the server holds proves the run's entry without hashing the ledger again.
    tree = watch(request.app).receipt_tree(store)
    try:
        built = issue(store, run_id, signing_key(bench.db), tree=tree)
    except ReceiptDoesNotHold as broken:
        return respond(request, "error.html", {
            "error": f"run {run_id}: no receipt, the stored ledger does not hold "
                     f"({broken.reason}); see /ledger", "status": 409}, 409)
    except UsageError as error:
        raise BadRequest(str(error)) from None
    return _download(built, f"receipt-{_file_part(run_id)}.json")


def _download(value: Any, name: str) -> Response:
    """``value`` as the command line writes it (``json_text``), as an attachment."""
    from ..reports.safe import json_text

    return Response(json_text(value) + "\n", media_type="application/json", headers={
        "content-disposition": f'attachment; filename="{name}"'})


def _file_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:120]


def _local_key(bench: Workbench) -> Ed25519PublicKey | None:
    """The store's key, when its file exists (not created to verify, as the command does)."""
    from ..errors import UsageError
    from ..store.ledger.keys import ledger_key_path, signing_key

    if not ledger_key_path(bench.db).exists():
        return None
    try:
        return signing_key(bench.db).public_key()
    except UsageError as error:
        raise BadRequest(str(error)) from None


def _verification(app: FastAPI, store: Store, bench: Workbench) -> dict[str, Any]:
    """What the page says of the ledger: its last check, brought up to date."""
    from ..store.ledger.receipts import fingerprint

    watched = watch(app)
    verified, since = watched.look(store, _local_key(bench))
    data: dict[str, Any] = {
        "status": "checking", "checking_since": since, "error": watched.error,
        "entries": None, "erased": None, "heads": None, "first_bad": None, "reason": None,
        "key": None, "checked_in_full_at": None, "checked_at": None,
    }
    if verified is not None:
        result = verified.result
        data.update({
            "status": "verified" if result.ok else "broken",
            "entries": verified.entries, "erased": verified.erased, "heads": verified.heads,
            "first_bad": result.first_bad, "reason": result.reason or None,
            "key": None if verified.key is None else fingerprint(verified.key),
            "checked_in_full_at": verified.full_at, "checked_at": verified.checked_at,
        })
    return data


def _head(head: Any) -> dict[str, Any] | None:
    """The newest head as the page shows it (its key by fingerprint)."""
    from ..store.ledger.heads import StoredHead
    from ..store.ledger.receipts import fingerprint

    if head is None:
        return None
    parsed = StoredHead(head.size, head.root, head.signature, head.public_key, "").parsed()
    return {"size": head.size, "root": head.root, "signed_at": head.created_at,
            "fingerprint": None if parsed is None else fingerprint(parsed[1]),
            "well_formed": parsed is not None}
