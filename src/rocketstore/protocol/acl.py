"""RocketMQ ACL request signatures (sans-IO).

A signed request carries ``AccessKey`` and ``Signature`` in its extFields. The signature is
``base64(HmacSHA1(secretKey, content))`` where content is the UTF-8 concatenation of every extFields
value except ``Signature``, in ascending key order, followed by the raw body (RocketMQ's
``AclUtils.combineRequestContent``). Java's AclClientRPCHook also signs ``SecurityToken`` when set;
the C++ client (librocketmq 1.2.x, as in the ``rocketmq`` 0.4.4 wheel) adds ``OnsChannel`` (the
"channel" given to ``set_session_credentials``) instead. Both are plain extFields, so one rule
verifies both.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"


def signing_content(ext_fields: Mapping[str, str], body: bytes) -> bytes:
    """The bytes a request's signature covers."""
    text = "".join(value for key, value in sorted(ext_fields.items()) if key != SIGNATURE)
    return text.encode("utf-8") + body


def sign(secret_key: str, ext_fields: Mapping[str, str], body: bytes) -> str:
    """Signature of a request with these extFields and body."""
    digest = hmac.new(secret_key.encode("utf-8"), signing_content(ext_fields, body), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def verify(secret_key: str, ext_fields: Mapping[str, str], body: bytes) -> bool:
    """True when the request's ``Signature`` matches `secret_key`."""
    given = ext_fields.get(SIGNATURE)
    return given is not None and hmac.compare_digest(given, sign(secret_key, ext_fields, body))


def signed_fields(access_key: str, secret_key: str, ext_fields: Mapping[str, str], body: bytes) -> dict[str, str]:
    """`ext_fields` plus ``AccessKey`` and ``Signature``, as a Java ACL client sends them."""
    fields = dict(ext_fields)
    fields[ACCESS_KEY] = access_key
    fields[SIGNATURE] = sign(secret_key, fields, body)
    return fields
