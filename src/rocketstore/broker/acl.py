"""Access control in the shape of RocketMQ's plain_acl.yml: accounts, secret keys, topic and group perms.

    globalWhiteRemoteAddresses: ["127.0.0.*"]     # skip the signature check for these peers
    accounts:
      - accessKey: RocketMQ
        secretKey: "12345678"
        whiteRemoteAddress:                       # this account needs no signature from these peers
        admin: false                              # admin: every resource, every admin request
        defaultTopicPerm: DENY                    # DENY | PUB | SUB | PUB|SUB | ANY
        defaultGroupPerm: SUB
        topicPerms: ["TopicA=PUB|SUB"]
        groupPerms: ["GroupA=SUB"]

Requests are checked as RocketMQ's PlainAccessValidator does: the signature (see
`rocketstore.protocol.acl`), then the permission each request code needs on its topic and group.
A retry topic ``%RETRY%G`` is checked as group ``G``. The file is read with a small YAML subset
reader (block mappings and lists, inline ``[a, b]`` lists, quoted or plain scalars, comments),
enough for plain_acl.yml; JSON is accepted too.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from rocketstore.format.topics import RETRY_PREFIX
from rocketstore.protocol import RemotingCommand, RequestCode
from rocketstore.protocol.acl import ACCESS_KEY, verify
from rocketstore.protocol.bodies import decode_json_body

PUB, SUB = 1, 2
ANY = PUB | SUB
"""A need met by either permission (a route query)."""
_PERMS = {"DENY": 0, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "ANY": PUB | SUB}


class AclConfigError(ValueError):
    """An ACL file that cannot be read."""


def _scalar(text: str) -> Any:
    text = text.strip()
    if not text or text == "~" or text == "null":
        return None
    if text[0] in "\"'" and text[-1] == text[0] and len(text) >= 2:
        return text[1:-1]
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(part) for part in text[1:-1].split(",") if part.strip()]
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return text


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if ch in "\"'":
            quote = None if quote == ch else (quote or ch)
        elif ch == "#" and quote is None and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def parse_yaml_subset(text: str) -> Any:
    """Value of a plain_acl.yml-shaped YAML document.

    Raises:
        AclConfigError: indentation or syntax this reader does not understand.
    """
    lines = [(len(raw) - len(raw.lstrip(" ")), raw.strip())
             for raw in (_strip_comment(line).rstrip() for line in text.splitlines()) if raw.strip()]
    value, pos = _parse_block(lines, 0, lines[0][0] if lines else 0)
    if pos != len(lines):
        raise AclConfigError(f"unexpected indentation near {lines[pos][1]!r}")
    return value


def _parse_block(lines: list[tuple[int, str]], pos: int, indent: int) -> tuple[Any, int]:
    if pos >= len(lines):
        return None, pos
    if lines[pos][1].startswith("- ") or lines[pos][1] == "-":
        return _parse_list(lines, pos, indent)
    return _parse_map(lines, pos, indent)


def _parse_list(lines: list[tuple[int, str]], pos: int, indent: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    while pos < len(lines) and lines[pos][0] == indent and (lines[pos][1].startswith("-")):
        rest = lines[pos][1][1:].strip()
        if not rest:
            value, pos = _parse_block(lines, pos + 1, lines[pos + 1][0] if pos + 1 < len(lines) else indent)
            items.append(value)
        elif ":" in rest and not rest.startswith(("'", '"')) and _key_value(rest) is not None:
            sub_indent = indent + (len(lines[pos][1]) - len(rest))
            lines[pos] = (sub_indent, rest)
            value, pos = _parse_map(lines, pos, sub_indent)
            items.append(value)
        else:
            items.append(_scalar(rest))
            pos += 1
    return items, pos


def _key_value(text: str) -> tuple[str, str] | None:
    key, sep, rest = text.partition(":")
    if not sep or (rest and not rest.startswith(" ")):
        return None
    return key.strip().strip("\"'"), rest.strip()


def _parse_map(lines: list[tuple[int, str]], pos: int, indent: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    while pos < len(lines) and lines[pos][0] == indent:
        kv = _key_value(lines[pos][1])
        if kv is None:
            raise AclConfigError(f"expected 'key: value', got {lines[pos][1]!r}")
        key, rest = kv
        pos += 1
        if rest:
            result[key] = _scalar(rest)
        elif pos < len(lines) and (lines[pos][0] > indent or
                                   (lines[pos][0] == indent and lines[pos][1].startswith("-"))):
            result[key], pos = _parse_block(lines, pos, lines[pos][0])
        else:
            result[key] = None
    return result, pos


def _perm(text: object) -> int:
    value = _PERMS.get(str(text).strip().upper().replace(" ", "")) if text is not None else None
    if value is None:
        raise AclConfigError(f"unknown permission {text!r}")
    return value


def _perm_table(entries: object) -> dict[str, int]:
    table = {}
    for entry in entries if isinstance(entries, list) else []:
        name, sep, perm = str(entry).partition("=")
        if not sep:
            raise AclConfigError(f"permission entry {entry!r} is not NAME=PERM")
        table[name.strip()] = _perm(perm)
    return table


@dataclass(frozen=True, slots=True)
class Account:
    """One access key and what it may do."""

    access_key: str
    secret_key: str
    admin: bool = False
    default_topic_perm: int = 0
    default_group_perm: int = 0
    topic_perms: Mapping[str, int] = field(default_factory=dict)
    group_perms: Mapping[str, int] = field(default_factory=dict)
    white_remote_address: str | None = None


@dataclass(frozen=True, slots=True)
class AclConfig:
    """A whole plain_acl.yml."""

    accounts: Mapping[str, Account]
    global_white_addresses: tuple[str, ...] = ()

    @classmethod
    def load(cls, path: Path) -> AclConfig:
        """Read a plain_acl.yml (or the same structure as JSON).

        Raises:
            AclConfigError: unreadable file or unknown permission names.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AclConfigError(f"cannot read ACL file {path}: {exc}") from exc
        data = json.loads(text) if text.lstrip().startswith("{") else parse_yaml_subset(text)
        if not isinstance(data, dict):
            raise AclConfigError(f"ACL file {path} is not a mapping")
        accounts = {}
        for item in data.get("accounts") or []:
            if not isinstance(item, dict) or not item.get("accessKey") or item.get("secretKey") is None:
                raise AclConfigError(f"account without accessKey/secretKey in {path}")
            account = Account(
                access_key=str(item["accessKey"]), secret_key=str(item["secretKey"]),
                admin=bool(item.get("admin", False)),
                default_topic_perm=_perm(item.get("defaultTopicPerm") or "DENY"),
                default_group_perm=_perm(item.get("defaultGroupPerm") or "DENY"),
                topic_perms=_perm_table(item.get("topicPerms")), group_perms=_perm_table(item.get("groupPerms")),
                white_remote_address=str(item["whiteRemoteAddress"]) if item.get("whiteRemoteAddress") else None)
            accounts[account.access_key] = account
        white = tuple(str(a) for a in data.get("globalWhiteRemoteAddresses") or [])
        return cls(accounts, white)


def _group_of_retry(topic: str) -> str | None:
    return topic[len(RETRY_PREFIX):] if topic.startswith(RETRY_PREFIX) else None


class Need(NamedTuple):
    """A permission a request needs: PUB or SUB on a topic or a group."""

    kind: str  # "topic" or "group"
    name: str
    perm: int


TopicAt = Callable[[int], "str | None"]
"""The topic of the record at a commitlog offset, None when there is none."""

Rule = Callable[[RemotingCommand, TopicAt], list[Need]]


def topic_need(topic: str, perm: int) -> Need:
    """A topic need; a retry topic needs SUB on its group instead."""
    group = _group_of_retry(topic)
    return Need("group", group, SUB) if group is not None else Need("topic", topic, perm)


def topic_field(*names: str, perm: int) -> Rule:
    """The topic named by the first present header field of `names`."""
    def needs(cmd: RemotingCommand, topic_at: TopicAt) -> list[Need]:
        f = cmd.ext_fields
        return [topic_need(next((f[n] for n in names if n in f), ""), perm)]
    return needs


def group_field(name: str, perm: int = SUB, *, optional: bool = False) -> Rule:
    """The group named by header field `name` (with `optional`, nothing when the field is absent)."""
    def needs(cmd: RemotingCommand, topic_at: TopicAt) -> list[Need]:
        if optional and not cmd.ext_fields.get(name):
            return []
        return [Need("group", cmd.ext_fields.get(name, ""), perm)]
    return needs


def record_topic(name: str, perm: int = SUB) -> Rule:
    """The topic of the record at the commitlog offset in header field `name`: a request that reads a
    record by offset needs what reading its topic needs."""
    def needs(cmd: RemotingCommand, topic_at: TopicAt) -> list[Need]:
        try:
            offset = int(cmd.ext_fields.get(name, ""))
        except ValueError:
            return []  # the handler refuses the request itself
        topic = topic_at(offset)
        return [] if topic is None else [topic_need(topic, perm)]
    return needs


def _heartbeat(cmd: RemotingCommand, topic_at: TopicAt) -> list[Need]:
    data = decode_json_body(cmd.body) if cmd.body else {}
    needs = []
    for consumer in data.get("consumerDataSet") or []:
        needs.append(Need("group", str(consumer.get("groupName", "")), SUB))
        for sub in consumer.get("subscriptionDataSet") or []:
            needs.append(topic_need(str(sub.get("topic", "")), SUB))
    return needs


def _queue_locks(cmd: RemotingCommand, topic_at: TopicAt) -> list[Need]:
    data = decode_json_body(cmd.body) if cmd.body else {}
    needs = [Need("group", str(data.get("consumerGroup", "")), SUB)]
    needs += [topic_need(str(mq.get("topic", "")), SUB) for mq in data.get("mqSet") or [] if isinstance(mq, dict)]
    return needs


def _both(*rules: Rule) -> Rule:
    def needs(cmd: RemotingCommand, topic_at: TopicAt) -> list[Need]:
        return [need for rule in rules for need in rule(cmd, topic_at)]
    return needs


def _nothing(cmd: RemotingCommand, topic_at: TopicAt) -> list[Need]:
    return []  # a signed request of any account


ADMIN = "admin"
"""The rule of the requests only an admin account may send."""

NAME_SERVER = "name server"
"""The rule of the name-server requests: no check (RocketMQ 4.x's name server has no ACL)."""

_TOPIC_SUB = topic_field("topic", perm=SUB)
_TOPIC_AND_GROUP = _both(_TOPIC_SUB, group_field("consumerGroup"))


def _signed(cmd: RemotingCommand, topic_at: TopicAt) -> list[Need]:
    """A signed request of any account: RocketMQ 4.9.8's PlainAccessValidator checks no resource for the
    admin reads outside its ADMIN_CODE set (runtime info, configs, stats, reset offset, who consumes)."""
    return []

RULES: dict[int, Rule | str] = {
    RequestCode.SEND_MESSAGE: topic_field("topic", perm=PUB),
    RequestCode.SEND_MESSAGE_V2: topic_field("b", "topic", perm=PUB),
    RequestCode.SEND_BATCH_MESSAGE: topic_field("b", "topic", perm=PUB),
    RequestCode.CONSUMER_SEND_MSG_BACK: _both(group_field("group"), record_topic("offset")),
    RequestCode.PULL_MESSAGE: _TOPIC_AND_GROUP,
    RequestCode.QUERY_CONSUMER_OFFSET: _TOPIC_AND_GROUP,
    RequestCode.UPDATE_CONSUMER_OFFSET: _TOPIC_AND_GROUP,
    RequestCode.GET_MAX_OFFSET: _TOPIC_SUB,
    RequestCode.GET_MIN_OFFSET: _TOPIC_SUB,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: _TOPIC_SUB,
    RequestCode.GET_EARLIEST_MSG_STORETIME: _TOPIC_SUB,
    RequestCode.QUERY_MESSAGE: _TOPIC_SUB,
    RequestCode.VIEW_MESSAGE_BY_ID: record_topic("offset"),
    RequestCode.END_TRANSACTION: _signed,  # names no topic or group to check (the handler checks PGROUP)
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.UNREGISTER_CLIENT: group_field("consumerGroup", optional=True),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: group_field("consumerGroup"),
    RequestCode.LOCK_BATCH_MQ: _queue_locks,
    RequestCode.UNLOCK_BATCH_MQ: _queue_locks,
    RequestCode.UPDATE_AND_CREATE_TOPIC: ADMIN,
    RequestCode.GET_ALL_TOPIC_CONFIG: ADMIN,
    RequestCode.DELETE_TOPIC_IN_BROKER: ADMIN,  # RocketMQ's Permission.ADMIN_CODE
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: ADMIN,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: ADMIN,
    RequestCode.GET_BROKER_CONFIG: _signed,
    RequestCode.GET_BROKER_RUNTIME_INFO: _signed,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: _signed,
    RequestCode.GET_TOPIC_STATS_INFO: _signed,
    RequestCode.GET_CONSUME_STATS: _signed,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: _signed,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: _signed,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: _signed,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: _signed,
    RequestCode.GET_BROKER_CONSUME_STATS: _signed,
    RequestCode.QUERY_CONSUME_QUEUE: _signed,
    RequestCode.VIEW_BROKER_STATS_DATA: _signed,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: NAME_SERVER,
    RequestCode.GET_BROKER_CLUSTER_INFO: NAME_SERVER,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: NAME_SERVER,
    RequestCode.REGISTER_BROKER: NAME_SERVER,
    RequestCode.UNREGISTER_BROKER: NAME_SERVER,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: NAME_SERVER,
    RequestCode.GET_NAMESRV_CONFIG: NAME_SERVER,
    RequestCode.PUT_KV_CONFIG: NAME_SERVER,
    RequestCode.GET_KV_CONFIG: NAME_SERVER,
    RequestCode.DELETE_KV_CONFIG: NAME_SERVER,
}
"""What every request code the broker serves needs (a code missing here is refused, and a test holds
the table to the handlers' codes)."""


def allowed(account: Account, kind: str, name: str, perm: int) -> bool:
    """Whether `account` has `perm` on the topic or group `name` (ANY: PUB or SUB, either will do)."""
    if kind == "topic":
        have = account.topic_perms.get(name, account.default_topic_perm)
    else:
        have = account.group_perms.get(name, account.default_group_perm)
    return have & perm != 0 if perm == ANY else have & perm == perm


class AclChecker:
    """Decides whether a request may be served.

    Args:
        config: the loaded ACL file.
        topic_at: the topic of the record at a commitlog offset (None when there is none), for the
            requests that name a record by its offset.
    """

    def __init__(self, config: AclConfig, topic_at: TopicAt = lambda offset: None) -> None:
        self.config = config
        self.topic_at = topic_at

    def check(self, cmd: RemotingCommand, peer_ip: str) -> str | None:
        """None when `cmd` may be served, else the reason it is refused."""
        rule = RULES.get(cmd.code)
        if rule == NAME_SERVER:
            return None
        if any(fnmatch.fnmatch(peer_ip, pattern) for pattern in self.config.global_white_addresses):
            return None
        access_key = cmd.ext_fields.get(ACCESS_KEY)
        if not access_key:
            return "no AccessKey in the request"
        account = self.config.accounts.get(access_key)
        if account is None:
            return f"unknown AccessKey {access_key!r}"
        white = account.white_remote_address
        if not (white and fnmatch.fnmatch(peer_ip, white)) and not verify(account.secret_key, cmd.ext_fields,
                                                                              cmd.body):
            return "signature check failed"
        if account.admin:
            return None
        if rule is None:
            return f"request code {cmd.code} has no permission rule"
        if rule == ADMIN:
            return f"request code {cmd.code} needs an admin account"
        assert callable(rule)
        try:
            needs = rule(cmd, self.topic_at)
        except Exception:  # an undecodable body is refused, not crashed on
            return "request body cannot be read for the permission check"
        for kind, name, perm in needs:
            if not allowed(account, kind, name, perm):
                return f"{access_key} has no {'PUB' if perm == PUB else 'SUB'} permission on {kind} {name}"
        return None
