"""Times as text: epoch milliseconds or ISO 8601, always turned into epoch milliseconds, and written back
as ISO 8601 UTC with milliseconds.

Accepted forms:

    1795319618253                       epoch milliseconds (digits only)
    2026-11-22T03:53:38.253Z            ISO 8601 with a zone (`Z` or `+01:00`)
    2026-11-22T03:53:38 / 2026-11-22    ISO 8601 without a zone: taken as UTC, so that an answer
                                        never depends on the machine's time zone
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from rocketstore.format.layout import JAVA_LONG_MAX

_EPOCH_MS = re.compile(r"[0-9]{1,19}")
_MAX_MS = JAVA_LONG_MAX


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds for `text`.

    Raises:
        ValueError: `text` is neither epoch milliseconds nor an ISO 8601 date or date-time.
    """
    text = text.strip()
    if _EPOCH_MS.fullmatch(text):
        value = int(text)
        if value > _MAX_MS:
            raise ValueError(f"{text!r} is past the largest time ({_MAX_MS} ms)")
        return value
    iso = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: give epoch milliseconds or ISO 8601 (2026-11-22T03:53:38Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return _exact_ms(moment)


def _exact_ms(moment: datetime) -> int:
    # Integer arithmetic: float seconds could round a millisecond away.
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def format_time_ms(timestamp_ms: int | None) -> str:
    """ISO 8601 UTC with milliseconds (`2026-11-22T03:53:38.253Z`); empty for None."""
    if timestamp_ms is None:
        return ""
    try:
        moment = datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(timestamp_ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{timestamp_ms % 1000:03d}Z"
