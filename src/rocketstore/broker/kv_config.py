"""The name server's KV config (RocketMQ's KVConfigManager): namespace -> key -> value, set by
PUT_KV_CONFIG (100), read by GET_KV_CONFIG (101), removed by DELETE_KV_CONFIG (102).

RocketMQ's name server writes it to its kvConfigPath (`kvConfig.json`, ``{"configTable": {...}}``) at each
change and reads it at start; serve keeps the same file in the store's config folder
(`config/kvConfig.json`, compact JSON as RocketMQ writes it), and over a read-only store in memory only.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from rocketstore.format.store_dirs import CONFIG_DIR
from rocketstore.protocol.bodies import encode_json_body
from rocketstore.store.files import atomic_write, read_json

KV_CONFIG_FILE = "kvConfig.json"
MAX_ENTRIES = 10_000
"""Most keys over all namespaces: a client cannot make the table (and the file) grow without end."""
MAX_BYTES = 16 * 1024 * 1024
"""Most characters of namespaces, keys and values together."""
log = logging.getLogger("rocketstore.broker")


class KvConfig:
    """The table and its file.

    Args:
        store_path: the store folder (the file is config/kvConfig.json under it).
        read_only: never write the file.
    """

    def __init__(self, store_path: Path, *, read_only: bool = False) -> None:
        self.path = store_path / CONFIG_DIR / KV_CONFIG_FILE
        self.read_only = read_only
        self._table: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """Read the file (a missing or unreadable one: its .bak, else an empty table)."""
        data = read_json(self.path) or {}
        table = data.get("configTable")
        if isinstance(table, dict):
            self._table = {str(ns): {str(k): str(v) for k, v in kv.items()}
                           for ns, kv in table.items() if isinstance(kv, dict)}

    def __len__(self) -> int:
        return sum(len(kv) for kv in self._table.values())

    def _size(self) -> int:
        return sum(len(ns) + sum(len(k) + len(v) for k, v in kv.items()) for ns, kv in self._table.items())

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set a value and write the file.

        Raises:
            ValueError: the table holds MAX_ENTRIES keys already.
            OSError: the file could not be written (the value is kept in memory).
        """
        with self._lock:
            current = self.get(namespace, key)
            if current is None and len(self) >= MAX_ENTRIES:
                raise ValueError(f"the KV config holds {MAX_ENTRIES} keys already")
            grown = len(value) - (len(current) if current is not None else -len(key) - len(namespace))
            if self._size() + grown > MAX_BYTES:
                raise ValueError(f"the KV config would hold more than {MAX_BYTES} characters")
            self._table.setdefault(namespace, {})[key] = value
        self._persist()

    def delete(self, namespace: str, key: str) -> None:
        """Remove a key (an unknown one is no error) and write the file.

        Raises:
            OSError: the file could not be written (the key is gone from memory).
        """
        with self._lock:
            values = self._table.get(namespace)
            if values is None or values.pop(key, None) is None:
                return  # an emptied namespace stays, as in RocketMQ's file
        self._persist()

    def _persist(self) -> None:
        if self.read_only:
            return
        with self._lock:
            table = {ns: dict(sorted(kv.items())) for ns, kv in sorted(self._table.items())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, encode_json_body({"configTable": table}))  # compact, as RocketMQ writes it
