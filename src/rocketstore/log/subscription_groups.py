"""Subscription groups: `config/subscriptionGroup.json` in RocketMQ's SubscriptionGroupManager shape.

    {"dataVersion": {"counter": N, "timestamp": MS},
     "subscriptionGroupTable": {"<group>": {"brokerId": 0, "consumeBroadcastEnable": true, ...}}}

RocketMQ's broker starts with a few groups of its own (`DEFAULT_GROUPS`), creates a group's config when
its first consumer's heartbeat arrives (autoCreateSubscriptionGroup) and changes it on
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP / DELETE_SUBSCRIPTIONGROUP. An admin's change rewrites the file at
once; groups created by heartbeats are written by the next `persist()` (the broker's periodic flush), so
a client naming many groups costs one write per flush, not one per group.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rocketstore.format.store_dirs import CONFIG_DIR, QUARANTINE_DIR
from rocketstore.log.json_config import JAVA_INT_MAX, StateFileProblem, java_int, load_state, write_json

SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
DEFAULT_GROUPS = ("SELF_TEST_C_GROUP", "CID_ONSAPI_OWNER", "CID_ONSAPI_PERMISSION", "TOOLS_CONSUMER",
                  "CID_ONS-HTTP-PROXY", "FILTERSRV_CONSUMER", "CID_ONSAPI_PULL")
MAX_GROUPS = 65_536
"""Most groups the table holds: a client cannot make it grow without end (heartbeats create groups)."""
MAX_GROUP_NAME = 255

_BOOLEANS = ("consumeBroadcastEnable", "consumeEnable", "consumeFromMinEnable", "notifyConsumerIdsChangedEnable")
_INTS = ("brokerId", "retryMaxTimes", "retryQueueNums", "whichBrokerWhenConsumeSlowly")


def default_group(name: str) -> dict[str, Any]:
    """The config RocketMQ gives a group nobody configured (SubscriptionGroupConfig's defaults)."""
    return {"brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True, "consumeFromMinEnable": True,
            "groupName": name, "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 16, "retryQueueNums": 1,
            "whichBrokerWhenConsumeSlowly": 1}


def group_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """A group's config from a SubscriptionGroupConfig JSON object: its known fields, defaults for the
    missing ones (as fastjson fills a new bean).

    Raises:
        ValueError: no usable groupName, or a field of the wrong type or outside Java's int.
    """
    name = data.get("groupName")
    if not isinstance(name, str) or not name or len(name) > MAX_GROUP_NAME:
        raise ValueError(f"groupName {name!r} is not a name of 1 to {MAX_GROUP_NAME} characters")
    config = default_group(name)
    for key in _BOOLEANS:
        if key in data and data[key] is not None:
            if not isinstance(data[key], bool):
                raise ValueError(f"{key} of group {name!r} is not a boolean")
            config[key] = data[key]
    for key in _INTS:
        if key in data and data[key] is not None:
            config[key] = java_int(data[key], f"{key} of group {name!r}", JAVA_INT_MAX)
    return config


class SubscriptionGroups:
    """The groups of one broker, persisted as config/subscriptionGroup.json.

    Args:
        root: the store folder.
        clock: epoch milliseconds (the file's dataVersion timestamp).
        read_only: keep changes in memory, never write the file.
    """

    def __init__(self, root: Path, clock: Callable[[], int], *, read_only: bool = False) -> None:
        self.path = root / CONFIG_DIR / SUBSCRIPTION_GROUP_FILE
        self.read_only = read_only
        self._clock = clock
        self._table: dict[str, dict[str, Any]] = {}
        self._counter = 0
        self._timestamp = clock()
        self._dirty = False
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one write of the file at a time

    def load(self) -> StateFileProblem | None:
        """Read the file (a damaged one: its .bak, or nothing) and add RocketMQ's own groups.

        Returns:
            what was wrong with the file, None when nothing was.

        Raises:
            OSError: a damaged file could not be set aside.
        """
        root = self.path.parent.parent
        quarantine = None if self.read_only else root / QUARANTINE_DIR / CONFIG_DIR
        (self._table, self._counter), problem = load_state(root, self.path, _parse, lambda: ({}, 0),
                                                           quarantine=quarantine)
        for name in DEFAULT_GROUPS:
            self._table.setdefault(name, default_group(name))
        return problem

    def get(self, name: str) -> dict[str, Any] | None:
        """The group's config, None when unknown."""
        return self._table.get(name)

    def __len__(self) -> int:
        return len(self._table)

    def encode(self) -> dict[str, Any]:
        """The SubscriptionGroupWrapper JSON object (GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body, the file's content)."""
        with self._lock:
            return {"dataVersion": {"counter": self._counter, "timestamp": self._timestamp},
                    "subscriptionGroupTable": {name: dict(cfg) for name, cfg in self._table.items()}}

    def ensure(self, name: str) -> bool:
        """Know `name` with the default config (a consumer's first heartbeat), written at the next
        `persist()`; True when it was added (False: known, not a name, or the table is full)."""
        if name in self._table or not name or len(name) > MAX_GROUP_NAME or len(self._table) >= MAX_GROUPS:
            return False
        self._change(name, default_group(name), write=False)
        return True

    def update(self, config: dict[str, Any]) -> None:
        """Create or replace a group's config (`group_config` made it).

        Raises:
            ValueError: the table is full.
            OSError: the file could not be written (the change is kept in memory).
        """
        name = config["groupName"]
        if name not in self._table and len(self._table) >= MAX_GROUPS:
            raise ValueError(f"the broker holds {MAX_GROUPS} subscription groups already")
        self._change(name, config)

    def delete(self, name: str) -> bool:
        """Forget a group; True when it was known.

        Raises:
            OSError: the file could not be written (the group is gone from memory).
        """
        if name not in self._table:
            return False
        self._change(name, None)
        return True

    def persist(self) -> None:
        """Write the file when something changed since the last write (nothing over a read-only store).

        Raises:
            OSError: the file could not be written (the next persist tries again).
        """
        if self.read_only:
            return
        with self._write_lock:
            with self._lock:
                if not self._dirty:
                    return
                self._dirty = False
            data = self.encode()
            data["subscriptionGroupTable"] = {n: dict(sorted(c.items()))
                                              for n, c in data["subscriptionGroupTable"].items()}
            try:
                write_json(self.path, data)
            except OSError:
                self._dirty = True
                raise

    def _change(self, name: str, config: dict[str, Any] | None, *, write: bool = True) -> None:
        with self._lock:
            if config is None:
                self._table.pop(name, None)
            else:
                self._table[name] = config
            self._counter += 1
            self._timestamp = self._clock()
            self._dirty = True
        if write:
            self.persist()


def _parse(data: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], int]:
    """The group table and data-version counter of subscriptionGroup.json's content.

    Raises:
        ValueError: an entry that is not a group config.
    """
    table = data.get("subscriptionGroupTable") or {}
    if not isinstance(table, dict):
        raise ValueError(f"subscriptionGroupTable is a {type(table).__name__}, not an object")
    parsed: dict[str, dict[str, Any]] = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            raise ValueError(f"group {name!r} is a {type(entry).__name__}, not an object")
        parsed[str(name)] = group_config({**entry, "groupName": entry.get("groupName", name)})
    version = data.get("dataVersion") or {}
    counter = java_int(version.get("counter", 0), "dataVersion.counter") if isinstance(version, dict) else 0
    return parsed, counter
