"""ACL: every request code the broker serves has a permission rule, and a request that names a record
by its commitlog offset needs what reading that record's topic needs (an account denied a topic once
read its bodies by VIEW_MESSAGE_BY_ID, copied them into its own retry topic with CONSUMER_SEND_MSG_BACK
and read its offsets)."""

from __future__ import annotations

import pytest

from rocketstore import Message, MessageStore
from rocketstore.broker.acl import RULES
from rocketstore.broker.handlers_admin import AdminHandlers
from rocketstore.broker.handlers_client import ClientHandlers
from rocketstore.broker.handlers_pull import PullHandlers
from rocketstore.broker.handlers_query import QueryHandlers
from rocketstore.broker.handlers_send import SendHandlers
from rocketstore.broker.handlers_transaction import TransactionHandlers
from rocketstore.broker.namesrv import NameServerHandlers
from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient

from .broker_support import BrokerProcess, create_store

pytestmark = pytest.mark.broker


def test_every_request_code_served_has_a_permission_rule_and_every_rule_a_handler():
    served: set[int] = set()
    for group in (SendHandlers, PullHandlers, ClientHandlers, QueryHandlers, AdminHandlers, TransactionHandlers):
        served |= set(group(None).table())  # type: ignore[arg-type]
    served |= set(NameServerHandlers(None, None).table())  # type: ignore[arg-type]
    assert served - set(RULES) == set(), "a handler without an ACL rule"
    assert set(RULES) - served == set(), "a rule for a code nothing serves"


ACL = """
accounts:
  - accessKey: owner
    secretKey: owner-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [Secret=PUB|SUB]
  - accessKey: outsider
    secretKey: outsider-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [Open=PUB|SUB]
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("acl-rules")
    store = create_store(root / "store")
    with MessageStore.open(store) as opened:
        secret = opened.put(Message("Secret", b"the secret body", keys=("k",)))
        opened.put(Message("Open", b"an open body"))
    acl = root / "plain_acl.yml"
    acl.write_text(ACL)
    process = BrokerProcess(store, root / "broker.log", "--acl", str(acl)).start()
    yield process, secret.phy_offset
    process.stop()


def _as(broker, who):
    return RemotingClient(broker.addr, credentials=(who, f"{who}-secret"))


REQUESTS = [
    ("VIEW_MESSAGE_BY_ID", RequestCode.VIEW_MESSAGE_BY_ID, lambda off: {"offset": off}),
    ("CONSUMER_SEND_MSG_BACK", RequestCode.CONSUMER_SEND_MSG_BACK,
     lambda off: {"offset": off, "group": "OutsiderGroup", "delayLevel": 0, "originMsgId": "",
                  "originTopic": "Secret"}),
    ("GET_MAX_OFFSET", RequestCode.GET_MAX_OFFSET, lambda off: {"topic": "Secret", "queueId": 0}),
    ("GET_MIN_OFFSET", RequestCode.GET_MIN_OFFSET, lambda off: {"topic": "Secret", "queueId": 0}),
    ("SEARCH_OFFSET_BY_TIMESTAMP", RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
     lambda off: {"topic": "Secret", "queueId": 0, "timestamp": 0}),
    ("GET_EARLIEST_MSG_STORETIME", RequestCode.GET_EARLIEST_MSG_STORETIME,
     lambda off: {"topic": "Secret", "queueId": 0}),
    ("QUERY_CONSUMER_OFFSET", RequestCode.QUERY_CONSUMER_OFFSET,
     lambda off: {"topic": "Secret", "queueId": 0, "consumerGroup": "OutsiderGroup"}),
    ("UPDATE_CONSUMER_OFFSET", RequestCode.UPDATE_CONSUMER_OFFSET,
     lambda off: {"topic": "Secret", "queueId": 0, "consumerGroup": "OutsiderGroup", "commitOffset": 0}),
    ("QUERY_MESSAGE", RequestCode.QUERY_MESSAGE,
     lambda off: {"topic": "Secret", "key": "k", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62}),
]


@pytest.mark.parametrize(("code", "fields"), [pytest.param(c, f, id=name) for name, c, f in REQUESTS])
def test_a_denied_topic_is_refused_whatever_the_request_names_it_by(broker, code, fields):
    process, offset = broker
    with _as(process, "outsider") as outsider:
        refused = outsider.request(code, fields(offset))
    assert refused.code == ResponseCode.NO_PERMISSION, (refused.code, refused.remark)
    assert "Secret" in (refused.remark or "")
    assert b"the secret body" not in (refused.body or b"")
    owner_fields = {k: "OwnerGroup" if v == "OutsiderGroup" else v for k, v in fields(offset).items()}
    with _as(process, "owner") as owner:
        allowed = owner.request(code, owner_fields)
    assert allowed.code != ResponseCode.NO_PERMISSION, (allowed.code, allowed.remark)


def test_the_owner_views_its_record_and_the_outsider_its_own(broker):
    process, offset = broker
    with _as(process, "owner") as owner:
        answer = owner.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
        assert answer.code == ResponseCode.SUCCESS and b"the secret body" in answer.body
    with _as(process, "outsider") as outsider:
        answer = outsider.request(RequestCode.GET_MAX_OFFSET, {"topic": "Open", "queueId": 0})
        assert answer.code == ResponseCode.SUCCESS
