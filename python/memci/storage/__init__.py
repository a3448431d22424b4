"""Where the context system keeps archived pages and its saved state.

- :mod:`~memci.storage.protocol`: the :class:`Storage` protocol every store implements;
- :mod:`~memci.storage.json_store`: the JSON rules all stores share and their base class, :class:`JsonStore`;
- the stores: :class:`MemoryStorage` (``memory``, the default), :class:`SqliteStorage` (``sqlite``),
  :class:`DirectoryStorage` (``directory``), :class:`RedisStorage` (``redis``, needs the ``redis`` extra,
  imported only when one is opened).

Semantics and guarantees per store: ``docs/storage.md``.
"""

from memci.storage.directory import DirectoryStorage
from memci.storage.json_store import JsonStore
from memci.storage.memory import MemoryStorage
from memci.storage.protocol import Storage
from memci.storage.redis import RedisStorage
from memci.storage.sqlite import SqliteStorage

__all__ = ["DirectoryStorage", "JsonStore", "MemoryStorage", "RedisStorage", "SqliteStorage", "Storage"]
