"""`--acl` on the gRPC endpoint: every call signed (MQv2-HMAC-SHA1 over x-mq-date-time), the same accounts
and permissions as the remoting broker, and a signed date-time that bounds a replay."""

from __future__ import annotations

import time

import pytest

from rocketstore.broker.acl import AclConfig
from rocketstore.broker.grpc.auth import MAX_SKEW_S, RULES, GrpcAuthenticator, sign
from rocketstore.broker.grpc.protos import pb
from rocketstore.broker.grpc.service import NOT_SERVED
from tests.grpc.grpc_support import GrpcBroker

ACL = """
accounts:
  - accessKey: owner
    secretKey: owner-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [Secret=PUB|SUB]
  - accessKey: reader
    secretKey: reader-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [Secret=SUB]
  - accessKey: root
    secretKey: root-secret
    admin: true
"""
NOW = 1_800_000_000.0


@pytest.fixture
def auth(tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    return GrpcAuthenticator(AclConfig.load(path), lambda: NOW)


def _metadata(ak: str, sk: str, at: float = NOW) -> list[tuple[str, str]]:
    date_time = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(at))
    authorization = (f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, "
                     f"Signature={sign(sk, date_time)}")
    return [("x-mq-date-time", date_time), ("authorization", authorization)]


def _send(topic: str):
    return pb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=topic), body=b"x")])


def _receive(topic: str, group: str = "G"):
    return pb.ReceiveMessageRequest(group=pb.Resource(name=group),
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)))


def test_signatures_permissions_and_the_replay_window(auth):
    owner, reader = _metadata("owner", "owner-secret"), _metadata("reader", "reader-secret")
    assert auth.check("SendMessage", owner, _send("Secret")) is None
    assert auth.check("SendMessage", reader, _send("Secret"))[0] == "FORBIDDEN"
    assert auth.check("ReceiveMessage", reader, _receive("Secret")) is None
    assert auth.check("ReceiveMessage", reader, _receive("Other"))[0] == "FORBIDDEN"
    assert auth.check("QueryRoute", reader, pb.QueryRouteRequest(topic=pb.Resource(name="Secret"))) is None
    assert auth.check("QueryRoute", reader, pb.QueryRouteRequest(topic=pb.Resource(name="Other")))[0] == "FORBIDDEN"
    assert auth.check("SendMessage", [], _send("Secret"))[0] == "UNAUTHORIZED"
    assert auth.check("SendMessage", _metadata("owner", "wrong"), _send("Secret"))[0] == "UNAUTHORIZED"
    assert auth.check("SendMessage", _metadata("nobody", "x"), _send("Secret"))[0] == "UNAUTHORIZED"
    assert auth.check("SendMessage", _metadata("owner", "owner-secret", NOW - MAX_SKEW_S + 60),
                      _send("Secret")) is None
    stale = auth.check("SendMessage", _metadata("owner", "owner-secret", NOW - MAX_SKEW_S - 60), _send("Secret"))
    assert stale is not None and stale[0] == "UNAUTHORIZED" and "not within" in stale[1]


def test_every_rpc_has_a_rule_or_is_not_served():
    served = {m.name for m in pb.service.methods} - set(NOT_SERVED)
    assert served == set(RULES)


@pytest.mark.broker
def test_the_real_client_needs_credentials_and_the_topic_permission(store_dir, tmp_path, client5):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    broker = GrpcBroker(store_dir, tmp_path / "broker.log", "--acl", str(acl)).start()
    try:
        broker.create_topic("Secret", credentials=("root", "root-secret"))
        args = ("produce", "--endpoint", broker.endpoint, "--topic", "Secret", "--count", "1")
        signed = [r for r in client5.run(*args, "--ak", "owner", "--sk", "owner-secret") if "sent" in r]
        assert [r.get("error") for r in signed] == [None], signed
        for creds in ((), ("--ak", "reader", "--sk", "reader-secret"), ("--ak", "owner", "--sk", "bad")):
            refused = [r for r in client5.run(*args, *creds) if "sent" in r or "error" in r]
            assert refused and all(r.get("error") for r in refused), (creds, refused)
        got = [m for m in client5.run("consume", "--endpoint", broker.endpoint, "--topic", "Secret",
                                      "--group", "Readers", "--expect", "1", "--timeout", "15",
                                      "--ak", "reader", "--sk", "reader-secret") if "body" in m]
        assert len(got) == 1
    finally:
        assert broker.stop() == 0, broker.log()
    assert "gRPC SendMessage refused FORBIDDEN" in broker.log()  # the reader's send
