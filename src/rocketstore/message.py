"""Message: what a producer hands to `MessageStore.put()`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rocketstore.errors import InvalidMessageError
from rocketstore.results import PutStatus


def _illegal(reason: str) -> InvalidMessageError:
    return InvalidMessageError(reason, PutStatus.MESSAGE_ILLEGAL)


@dataclass(frozen=True, slots=True)
class Message:
    """A message to store (slotted: the compiled prepare reads its fields straight from the slots).

    Args:
        topic: RocketMQ topic (letters, digits, `%`, `-`, `_`, `|`; at most 127 characters).
        body: the payload bytes (a str is encoded as UTF-8).
        queue_id: queue of the topic.
        tags: shorthand for the TAGS property.
        keys: shorthand for the KEYS property (joined with single spaces).
        properties: further properties, kept in the caller's order; may carry KEYS, TAGS, UNIQ_KEY,
            DELAY (a delay level 1..18) and WAIT ("false": do not wait for a sync flush).
        flag: producer-defined int32.
        born_timestamp: producer time in ms (default: the store clock).
        born_host: producer address "ip:port" (default: the store host's IP, port 0).
        sys_flag: RocketMQ sys flag (transaction type bits, compression bits).
        reconsume_times: redelivery count.
        prepared_transaction_offset: physical offset of the half message for COMMIT/ROLLBACK records.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    tags: str | None = None
    keys: Iterable[str] = ()
    properties: Mapping[str, str] | None = None
    flag: int = 0
    born_timestamp: int | None = None
    born_host: str | None = None
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    def __post_init__(self) -> None:
        """Raises:
            InvalidMessageError: a body that is not bytes-like or a str, or a str UTF-8 cannot encode.
        """
        if isinstance(self.body, str):
            try:
                object.__setattr__(self, "body", self.body.encode("utf-8"))
            except UnicodeEncodeError as exc:
                raise _illegal(f"body: a str with a character UTF-8 cannot encode at {exc.start} (a lone "
                               "surrogate)") from None
        elif not isinstance(self.body, (bytes, bytearray, memoryview)):
            raise _illegal(f"body must be bytes (or a str), not {type(self.body).__name__}")
        if isinstance(self.keys, str):
            object.__setattr__(self, "keys", (self.keys,))
        else:
            object.__setattr__(self, "keys", tuple(self.keys))
