"""ACL: the real C++ client signs with session credentials; the broker checks them (plain_acl.yml)."""

from __future__ import annotations

import pytest

from rocketstore.protocol import ResponseCode
from rocketstore.protocol.client import RemotingClient, RequestFailedError
from tests.broker.broker_support import BrokerProcess

pytestmark = pytest.mark.broker

ACL_YAML = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: writer
    secretKey: "writer-secret-1"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB|SUB
  - accessKey: outsider
    secretKey: outsider-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""


@pytest.fixture
def acl_broker(store_dir, tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YAML)
    proc = BrokerProcess(store_dir, tmp_path / "broker.log", "--acl", str(acl)).start()
    try:
        yield proc
    finally:
        if proc.alive():
            assert proc.stop() == 0, proc.log()


def test_real_client_refused_with_wrong_credentials_and_served_with_right_ones(acl_broker, real_client):
    base = ("--namesrv", acl_broker.namesrv, "--topic", "AclTopic", "--send-timeout-ms", "1500")
    for ak, sk in (("writer", "not-the-secret"), ("nobody", "x"), ("outsider", "outsider-secret")):
        lines = real_client.run("produce", *base, "--count", "1", "--key-prefix", "bad", "--ak", ak, "--sk", sk)
        assert lines[-1]["failures"] == 1, (ak, lines)
    lines = real_client.run("produce", *base, "--count", "1", "--key-prefix", "anon")
    assert lines[-1]["failures"] == 1, lines  # unsigned (empty AccessKey) requests are refused too

    good = real_client.run("produce", *base, "--count", "5", "--ak", "writer", "--sk", "writer-secret-1")
    assert [line.get("status") for line in good[:-1]] == [0] * 5

    lines = real_client.run("push", *base[:4], "--group", "AclGroup", "--expect", "5", "--timeout", "40",
                            "--ak", "writer", "--sk", "writer-secret-1")
    assert sorted(m["body"] for m in lines if "queue_offset" in m) == [f"k-body-{i}" for i in range(5)]

    lines = real_client.run("push", *base[:4], "--group", "AclGroup2", "--expect", "1", "--timeout", "4",
                            "--linger", "0", "--ak", "outsider", "--sk", "outsider-secret")
    assert [m for m in lines if "queue_offset" in m] == []

    # Our own client: signed requests are served, unsigned or wrongly signed ones get NO_PERMISSION.
    with RemotingClient(acl_broker.addr, credentials=("writer", "writer-secret-1")) as client:
        assert [m.body for m in client.query_message("AclTopic", "k2")] == [b"k-body-2"]
    for credentials in (None, ("writer", "wrong")):
        with RemotingClient(acl_broker.addr, credentials=credentials) as client:
            with pytest.raises(RequestFailedError) as info:
                client.query_message("AclTopic", "k2")
            assert info.value.code == ResponseCode.NO_PERMISSION
    assert "signature check failed" in acl_broker.log()
