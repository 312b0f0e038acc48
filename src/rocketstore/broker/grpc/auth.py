"""Credentials on the gRPC endpoint: the same accounts and permissions as the remoting broker
(`broker/acl.py`, from `--acl plain_acl.yml`), checked the way RocketMQ 5's proxy checks them.

A client with credentials sends, in each call's metadata, `x-mq-date-time` (`yyyyMMddTHHmmssZ`) and

    authorization: MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time, Signature=<hex>

where the signature is HMAC-SHA1 of the date-time under the secret key. A missing or wrong signature is
answered UNAUTHORIZED, a missing permission FORBIDDEN. The signed date-time bounds a replay: it must lie
within `MAX_SKEW_S` of the server's clock (14 h 15 min: clients such as the Python SDK write their local
time with a `Z`, so any time zone must pass).

What each call needs (`RULES`), on the topics and groups named in the request: SendMessage PUB on each
message's topic; EndTransaction PUB on its topic; QueryRoute PUB or SUB on the topic; QueryAssignment,
ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue SUB on the topic and the group;
Heartbeat, Telemetry and NotifyClientTermination a valid signature only.
A retry topic `%RETRY%G` is checked as group `G`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable
from typing import Any

from rocketstore.broker.acl import ANY, PUB, SUB, AclConfig, Need, allowed, topic_need

MAX_SKEW_S = 14 * 3600 + 15 * 60
DATE_HEADER = "x-mq-date-time"
_AUTHORIZATION = re.compile(
    r"^MQv2-HMAC-SHA1 Credential=([^,\s]*), ?SignedHeaders=([^,\s]*), ?Signature=([0-9A-Fa-f]+)$")

Rule = Callable[[Any], list[Need]]


def _send(request: Any) -> list[Need]:
    return [topic_need(m.topic.name, PUB) for m in request.messages]


def _end_transaction(request: Any) -> list[Need]:
    return [topic_need(request.topic.name, PUB)]


def _topic_and_group(request: Any) -> list[Need]:
    topic = request.message_queue.topic.name if hasattr(request, "message_queue") else request.topic.name
    return [topic_need(topic, SUB), Need("group", request.group.name, SUB)]


def _route(request: Any) -> list[Need]:
    return [topic_need(request.topic.name, ANY)]


def _signed_only(request: Any) -> list[Need]:
    return []


RULES: dict[str, Rule] = {
    "QueryRoute": _route,
    "Heartbeat": _signed_only,
    "Telemetry": _signed_only,
    "NotifyClientTermination": _signed_only,
    "SendMessage": _send,
    "EndTransaction": _end_transaction,
    "QueryAssignment": _topic_and_group,
    "ReceiveMessage": _topic_and_group,
    "AckMessage": _topic_and_group,
    "ChangeInvisibleDuration": _topic_and_group,
    "ForwardMessageToDeadLetterQueue": _topic_and_group,
}
"""What each served RPC needs; an RPC missing here is refused to every non-admin account."""


def sign(secret_key: str, date_time: str) -> str:
    """The signature a client sends for `date_time`."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


class GrpcAuthenticator:
    """Decides whether a gRPC call may be served.

    Args:
        config: the loaded ACL file (the remoting broker's).
        clock: seconds since the epoch (tests give their own).
    """

    def __init__(self, config: AclConfig, clock: Callable[[], float]) -> None:
        self.config = config
        self.clock = clock

    def check(self, rpc: str, metadata: Iterable[tuple[str, Any]], request: Any) -> tuple[str, str] | None:
        """None when the call may be served, else (UNAUTHORIZED or FORBIDDEN, the reason)."""
        headers = {str(k).lower(): str(v) for k, v in metadata}
        found = _AUTHORIZATION.match(headers.get("authorization", ""))
        if found is None:
            return "UNAUTHORIZED", "no MQv2-HMAC-SHA1 authorization in the request's metadata"
        access_key, signed_headers, signature = found.groups()
        account = self.config.accounts.get(access_key)
        if account is None:
            return "UNAUTHORIZED", f"unknown access key {access_key!r}"
        date_time = headers.get(DATE_HEADER, "")
        if signed_headers.lower() != DATE_HEADER or not hmac.compare_digest(
                signature.lower(), sign(account.secret_key, date_time)):
            return "UNAUTHORIZED", "signature check failed"
        skew = self._skew(date_time)
        if skew is None or skew > MAX_SKEW_S:
            return "UNAUTHORIZED", f"{DATE_HEADER} {date_time!r} is not within {MAX_SKEW_S} s of the server's time"
        if account.admin:
            return None
        rule = RULES.get(rpc)
        if rule is None:
            return "FORBIDDEN", f"{rpc} needs an admin account"
        for kind, name, perm in rule(request):
            if not allowed(account, kind, name, perm):
                wanted = "PUB or SUB" if perm == ANY else "PUB" if perm == PUB else "SUB"
                return "FORBIDDEN", f"{access_key} has no {wanted} permission on {kind} {name}"
        return None

    def _skew(self, date_time: str) -> float | None:
        try:
            signed = dt.datetime.strptime(date_time, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
        except ValueError:
            return None
        return abs(self.clock() - signed.timestamp())
