"""Where the context system keeps archived pages and its saved state.

- :mod:`~memci.storage.protocol`: the :class:`Storage` protocol every store implements;
- :mod:`~memci.storage.json_store`: the JSON rules all stores share and their base class, :class:`JsonStore`;
- the stores: :class:`MemoryStorage` (``memory``, the default), :class:`SqliteStorage` (``sqlite``),
  :class:`DirectoryStorage` (``directory``), :class:`RedisStorage` (``redis``, needs the ``redis`` extra,
  imported only when one is opened), :class:`PostgresStorage` (``postgres``, the ``postgres`` extra);
- :class:`EncryptedStorage` and :class:`AsyncEncryptedStorage` (``encrypted``, the ``encryption``
  extra): any store, with its pages and states sealed by AES-GCM;
- async (asyncio): the :class:`AsyncStorage` protocol (``async_protocol``), its base
  :class:`AsyncJsonStore` (``async_json_store``), :class:`AsyncSqliteStorage` (``async_sqlite``, needs
  the ``async`` extra), :class:`AsyncRedisStorage` (``async_redis``, the ``redis`` extra),
  :class:`AsyncPostgresStorage` (``async_postgres``, the ``postgres`` extra) and
  :class:`ThreadedStorage` (``threaded``: any sync store, run in a thread).

Semantics and guarantees per store: ``docs/storage.md``.
"""

from memci.storage.async_json_store import AsyncJsonStore
from memci.storage.async_postgres import AsyncPostgresStorage
from memci.storage.async_protocol import AsyncStorage
from memci.storage.async_redis import AsyncRedisStorage
from memci.storage.async_sqlite import AsyncSqliteStorage
from memci.storage.directory import DirectoryStorage
from memci.storage.encrypted import AsyncEncryptedStorage, EncryptedStorage
from memci.storage.json_store import JsonStore
from memci.storage.memory import MemoryStorage
from memci.storage.postgres import PostgresStorage
from memci.storage.protocol import Storage
from memci.storage.redis import RedisStorage
from memci.storage.sqlite import SqliteStorage
from memci.storage.threaded import ThreadedStorage

__all__ = [
    "AsyncEncryptedStorage",
    "AsyncJsonStore",
    "AsyncPostgresStorage",
    "AsyncRedisStorage",
    "AsyncSqliteStorage",
    "AsyncStorage",
    "DirectoryStorage",
    "EncryptedStorage",
    "JsonStore",
    "MemoryStorage",
    "PostgresStorage",
    "RedisStorage",
    "SqliteStorage",
    "Storage",
    "ThreadedStorage",
]
