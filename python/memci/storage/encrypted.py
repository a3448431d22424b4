"""``EncryptedStorage``: any store, with every page and state sealed (AES-256-GCM) before it is written.

A sealed page is a page to the store beneath (its index, empty fields and a ``"sealed"`` field:
``{"key": key_id, "data": base64(nonce + ciphertext + tag)}``), so any memci store, or one of your own,
holds it unchanged; a sealed state keeps in the clear only what a store checks a save against
(``version``, ``revision``, ``pages_through``, ``forgotten_through``). The index of a page, and those
numbers of a state, are the ciphertext's associated data: a sealed page moved to another index, or a
revision changed, fails to open, as does any changed byte (:class:`~memci.StorageError`).

Keys have ids: new writes use the current key; pages sealed with an older key open as long as that
key is given in ``old_keys`` (pages are written once, so an old page keeps its key). The nonce is
derived from the key, the associated data and the plaintext (as in SIV modes): the same page sealed
twice with one key gives the same bytes, so the write-once rule of the store beneath still holds.
A page stored before it had a search vector gains it as every store lets a committed page gain
it: under the one key ``"vector"``, here sealed beside the page (its associated data names the
index and the page's ciphertext), so an old encrypted archive is embedded once, ever.
Needs ``pip install 'memci[encryption]'`` (the ``cryptography`` package).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Any

from memci._optional import needs_extra
from memci.errors import ConflictError, StorageError, repr_of
from memci.storage.async_protocol import async_pages_of
from memci.storage.json_store import (
    VECTOR_KEY,
    adds_vector,
    check_index,
    decode_page,
    decode_state,
    encode_page,
    encode_state,
    same_content,
)
from memci.storage.protocol import pages_of

__all__ = ["AsyncEncryptedStorage", "EncryptedStorage", "Sealer"]

#: The state keys a store checks a save against: kept in the clear (and authenticated).
CLEAR_STATE_KEYS = ("version", "revision", "pages_through", "forgotten_through")
_NONCE_BYTES = 12


def _derived(key: bytes, purpose: bytes) -> bytes:
    """A key of its own for ``purpose``, derived from ``key`` (HMAC-SHA256 as the PRF)."""
    return hmac.new(key, b"memci " + purpose, hashlib.sha256).digest()


def _check_key(key_id: object, key: object) -> bytes:
    if not isinstance(key_id, str) or not 1 <= len(key_id) <= 64 or not key_id.isprintable():
        raise StorageError(f"a key id must be a printable str of 1 to 64 characters, got {repr_of(key_id)}", "key")
    if not isinstance(key, bytes | bytearray) or len(key) not in (16, 24, 32):
        got = f"{len(key)} bytes" if isinstance(key, bytes | bytearray) else type(key).__name__
        raise StorageError(f"key {key_id!r} must be 16, 24 or 32 bytes (os.urandom(32)), got {got}", "key")
    return bytes(key)


class Sealer:
    """Seals and opens pages and states with AES-GCM; the keys by id (``key_id`` the current one)."""

    __slots__ = ("_keys", "key_id")

    def __init__(self, key: bytes, key_id: str = "1", old_keys: Mapping[str, bytes] | None = None) -> None:
        with needs_extra("encryption", "EncryptedStorage"):
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        if old_keys is not None and not isinstance(old_keys, Mapping):
            raise StorageError(f"old_keys must be a mapping of key id to key, got {repr_of(old_keys)}", "old_keys")
        checked = [(key_id, _check_key(key_id, key)), *((k, _check_key(k, v)) for k, v in (old_keys or {}).items())]
        self._keys: dict[str, tuple[Any, bytes]] = {}
        for kid, raw in reversed(checked):  # the current key wins over an old one of the same id
            self._keys[kid] = (AESGCM(_derived(raw, b"encryption")), _derived(raw, b"nonce"))
        self.key_id = key_id

    def _seal(self, plaintext: str, aad: bytes) -> dict[str, str]:
        cipher, nonce_key = self._keys[self.key_id]
        data = plaintext.encode("utf-8")
        nonce = hmac.new(nonce_key, aad + b"\x00" + data, hashlib.sha256).digest()[:_NONCE_BYTES]
        sealed = nonce + cipher.encrypt(nonce, data, aad + self.key_id.encode())
        return {"key": self.key_id, "data": base64.b64encode(sealed).decode("ascii")}

    def _open(self, record: dict[str, Any], aad: bytes, where: str) -> str:
        from cryptography.exceptions import InvalidTag

        sealed = record.get("sealed")
        if (
            not isinstance(sealed, dict)
            or not isinstance(sealed.get("key"), str)
            or not isinstance(sealed.get("data"), str)
        ):
            raise StorageError(f"{where}: not sealed (written without EncryptedStorage?)", where)
        kid = sealed["key"]
        if kid not in self._keys:
            raise StorageError(f"{where}: sealed with key {repr_of(kid)}, which this store was not given", where)
        try:
            raw = base64.b64decode(sealed["data"], validate=True)
            plain: bytes = self._keys[kid][0].decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], aad + kid.encode())
            return plain.decode("utf-8")
        except (InvalidTag, ValueError):
            raise StorageError(
                f"{where}: cannot be opened: changed since it was sealed, or sealed with another key", where
            ) from None

    def seal_page(self, index: int, page: Any) -> dict[str, Any]:
        """The sealed record of ``page`` (checked as every store checks a page) to store under ``index``."""
        text = encode_page(index, page)
        return {
            "index": index,
            "messages": [],
            "summary": "",
            "entry_summaries": [],
            "archived_round": 0,
            "sealed": self._seal(text, b"page %d" % index),
        }

    def open_page(self, index: int, record: dict[str, Any] | None, where: str) -> dict[str, Any] | None:
        """The page sealed in ``record`` (stored under ``index``)."""
        return None if record is None else self.open_pages({index: record}, where)[index]

    def open_pages(self, records: dict[int, dict[str, Any]], where: str) -> dict[int, dict[str, Any]]:
        """The pages sealed in ``records`` (by index), each with the search vector sealed beside it
        when it was written back later (:meth:`with_vector`)."""
        pages = {}
        for index, record in records.items():
            text = self._open(record, b"page %d" % index, f"{where}: page {index}")
            page = decode_page(text, index, functools.partial(str, f"{where}: page {index}"))
            if VECTOR_KEY in record:
                vector = self._open(
                    {"sealed": record[VECTOR_KEY]}, _vector_aad(index, record), f"{where}: page {index}'s vector"
                )
                page.setdefault(VECTOR_KEY, vector)
            pages[index] = page
        return pages

    def with_vector(self, index: int, record: dict[str, Any], vector: str) -> dict[str, Any]:
        """``record`` (a page sealed without its search vector) with ``vector`` sealed beside it: the
        stored page plus the one key a store lets a committed page gain. The vector's associated
        data names the page's index and its ciphertext, so it opens with that record only."""
        return {**record, VECTOR_KEY: self._seal(vector, _vector_aad(index, record))}

    @staticmethod
    def _state_aad(record: Mapping[str, Any]) -> bytes:
        return ("state " + ",".join(repr(record.get(key)) for key in CLEAR_STATE_KEYS)).encode()

    def seal_state(self, state: Any) -> dict[str, Any]:
        """The sealed record of ``state`` (checked as every store checks one)."""
        text = encode_state(state)
        record = {key: state[key] for key in CLEAR_STATE_KEYS if key in state}
        record["sealed"] = self._seal(text, self._state_aad(record))
        return record

    def open_state(self, record: dict[str, Any] | None, where: str) -> dict[str, Any] | None:
        """The state sealed in ``record``."""
        if record is None:
            return None
        text = self._open(record, self._state_aad(record), f"{where}: state")
        return decode_state(text, lambda: f"{where}: state")

    def stored_form(self, index: int, record: dict[str, Any] | None, page: dict[str, Any]) -> dict[str, Any] | None:
        """The record to write so that the store beneath, holding ``record``, takes ``page``:
        ``record`` itself when it holds ``page`` (sealed with any key, keys in any order);
        ``record`` with the vector sealed beside it (:meth:`with_vector`) when ``page`` is the
        stored page with the search vector it lacked; None when ``record`` holds another page."""
        try:
            opened = self.open_page(index, record, "")
        except StorageError:
            return None
        if opened is None or record is None:
            return None
        text = encode_page(index, opened)
        if same_content(text, page):
            return record
        if adds_vector(text, page) and isinstance(page[VECTOR_KEY], str):
            return self.with_vector(index, record, page[VECTOR_KEY])
        return None

    def same_page(self, index: int, record: dict[str, Any] | None, page: dict[str, Any]) -> bool:
        """Whether the stored ``record`` holds ``page``, or holds it without the search vector it
        adds (``put_page`` writes a page once: such a page keeps its record)."""
        return self.stored_form(index, record, page) is not None


def _sealed_pages(sealer: Sealer, pages: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each page with its sealed record."""
    if isinstance(pages, str | bytes | dict) or not isinstance(pages, Iterable):
        raise StorageError(f"state: pages must be a list of pages, got {type(pages).__name__}", "pages")
    return [
        (page, sealer.seal_page(check_index(page.get("index") if type(page) is dict else None), page)) for page in pages
    ]


def _resealed(
    sealer: Sealer, batch: list[tuple[dict[str, Any], dict[str, Any]]], stored: list[dict[str, Any] | None]
) -> list[dict[str, Any]] | None:
    """After the store refused a save: its pages again, each stored already with the same content
    (sealed under an older key, or from its keys in another order) replaced by its stored record,
    and each that adds the search vector its stored page lacked by that record with the vector
    sealed beside it, so that the store's write-once check passes; None when no page was."""
    again = []
    for (page, sealed), old in zip(batch, stored, strict=True):
        form = None if old is None else sealer.stored_form(sealed["index"], old, page)
        again.append(sealed if form is None else form)
    return None if all(a is s for a, (_, s) in zip(again, batch, strict=True)) else again


def _vector_aad(index: int, record: dict[str, Any]) -> bytes:
    """The associated data of a vector sealed beside the sealed page ``record`` stored under ``index``."""
    sealed = record.get("sealed")
    data = sealed.get("data") if isinstance(sealed, dict) else None
    digest = hashlib.sha256(data.encode("ascii", "replace") if isinstance(data, str) else b"").digest()
    return b"vector %d " % index + digest


class EncryptedStorage:
    """``store`` (any :class:`~memci.storage.Storage`) with pages and states sealed by AES-GCM:
    ``EncryptedStorage(memci.PostgresStorage(dsn, namespace="c-1"), key)``.

    ``key`` is 16, 24 or 32 bytes (``os.urandom(32)``; keep it outside the database), ``key_id`` its
    id (stored beside each sealed value), ``old_keys`` the keys of earlier ids that still open what
    they sealed. The guarantees (atomic saves, the revision compare-and-set, crashes) are the
    store's; :meth:`close` closes it."""

    __slots__ = ("_sealer", "store")

    def __init__(
        self, store: Any, key: bytes, *, key_id: str = "1", old_keys: Mapping[str, bytes] | None = None
    ) -> None:
        from memci.storage.protocol import Storage

        if not isinstance(store, Storage):
            raise StorageError(f"EncryptedStorage: store must be a memci Storage, got {type(store).__name__}", "store")
        self._sealer = Sealer(key, key_id, old_keys)
        self.store = store

    def __repr__(self) -> str:
        return f"EncryptedStorage({self.store!r}, key_id={self._sealer.key_id!r})"

    def put_page(self, index: int, page: dict[str, Any]) -> None:
        """Seal ``page`` and store it under ``index``, once (the same page again is a no-op)."""
        record = self._sealer.seal_page(index, page)
        try:
            self.store.put_page(index, record)
        except StorageError:
            if not self._sealer.same_page(index, self.store.get_page(index), page):  # sealed by another key?
                raise

    def get_page(self, index: int) -> dict[str, Any] | None:
        return self._sealer.open_page(index, self.store.get_page(index), repr(self))

    def get_pages(self, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The pages among ``indices``, opened, read in one batch of the store beneath."""
        found = pages_of(self.store, indices)
        return self._sealer.open_pages(found, repr(self))

    def page_indices(self) -> list[int]:
        return self.store.page_indices()

    def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        """Seal ``state`` and ``pages`` and save them in one commit of the store beneath."""
        record, batch = self._sealer.seal_state(state), _sealed_pages(self._sealer, pages)
        try:
            self.store.save_state(record, [sealed for _, sealed in batch])
        except ConflictError:
            raise
        except StorageError:
            stored = pages_of(self.store, [sealed["index"] for _, sealed in batch])  # one batched read
            again = _resealed(self._sealer, batch, [stored.get(sealed["index"]) for _, sealed in batch])
            if again is None:
                raise
            self.store.save_state(record, again)

    def load_state(self) -> dict[str, Any] | None:
        return self._sealer.open_state(self.store.load_state(), repr(self))

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> EncryptedStorage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEncryptedStorage:
    """:class:`EncryptedStorage` over an :class:`~memci.storage.AsyncStorage`: the same sealing, awaited."""

    __slots__ = ("_sealer", "store")

    def __init__(
        self, store: Any, key: bytes, *, key_id: str = "1", old_keys: Mapping[str, bytes] | None = None
    ) -> None:
        from memci.storage.async_protocol import AsyncStorage

        if not isinstance(store, AsyncStorage):
            raise StorageError(
                f"AsyncEncryptedStorage: store must be a memci AsyncStorage, got {type(store).__name__}", "store"
            )
        self._sealer = Sealer(key, key_id, old_keys)
        self.store = store

    def __repr__(self) -> str:
        return f"AsyncEncryptedStorage({self.store!r}, key_id={self._sealer.key_id!r})"

    async def put_page(self, index: int, page: dict[str, Any]) -> None:
        record = self._sealer.seal_page(index, page)
        try:
            await self.store.put_page(index, record)
        except StorageError:
            if not self._sealer.same_page(index, await self.store.get_page(index), page):
                raise

    async def get_page(self, index: int) -> dict[str, Any] | None:
        return self._sealer.open_page(index, await self.store.get_page(index), repr(self))

    async def get_pages(self, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The pages among ``indices``, opened, read in one batch of the store beneath."""
        found = await async_pages_of(self.store, indices)
        return self._sealer.open_pages(found, repr(self))

    async def page_indices(self) -> list[int]:
        indices: list[int] = await self.store.page_indices()
        return indices

    async def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        record, batch = self._sealer.seal_state(state), _sealed_pages(self._sealer, pages)
        try:
            await self.store.save_state(record, [sealed for _, sealed in batch])
        except ConflictError:
            raise
        except StorageError:
            stored = await async_pages_of(self.store, [sealed["index"] for _, sealed in batch])
            again = _resealed(self._sealer, batch, [stored.get(sealed["index"]) for _, sealed in batch])
            if again is None:
                raise
            await self.store.save_state(record, again)

    async def load_state(self) -> dict[str, Any] | None:
        return self._sealer.open_state(await self.store.load_state(), repr(self))

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> AsyncEncryptedStorage:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
