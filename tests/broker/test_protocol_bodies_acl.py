"""Bodies (fastjson JSON, batch messages, routes) and ACL signatures and permissions."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.broker.acl import AclChecker, AclConfig, AclConfigError, parse_yaml_subset
from rocketstore.errors import RemoteProtocolError
from rocketstore.protocol import RemotingCommand, RequestCode
from rocketstore.protocol.acl import sign, signed_fields, signing_content, verify
from rocketstore.protocol.bodies import (
    BATCH_FIXED,
    BatchItem,
    decode_batch_body,
    decode_json_body,
    encode_batch_body,
    topic_route_body,
)

# Requests signed by librocketmq (PyPI rocketmq 0.4.4) with set_session_credentials("AK", "SK", "ALIYUN"),
# and one it signed without credentials (empty access and secret key), captured on loopback.
CPP_SIGNED = [
    ("SK", {"AccessKey": "AK", "OnsChannel": "ALIYUN", "Signature": "nbbUA67vw6SwAX4rwQCfBDWPlkc=",
            "topic": "TopicA"}, b""),
    ("SK", {"AccessKey": "AK", "OnsChannel": "ALIYUN", "Signature": "70NTj/YUUDN6JK/rrHS71JfajOI=", "batch": "0",
            "bornTimestamp": "1795321932258", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "flag": "0",
            "producerGroup": "PG",
            "properties": "KEYS\x01k1 k2\x02TAGS\x01TagA\x02UNIQ_KEY\x010100007F0000F0AA0000620C7C720100\x02"
                          "WAIT\x01true\x02",
            "queueId": "0", "reconsumeTimes": "0", "sysFlag": "0", "topic": "TopicA", "unitMode": "0"}, b"hello"),
    ("SK", {"AccessKey": "AK", "OnsChannel": "ALIYUN", "Signature": "vAK6EtdSC5v58QFaTqQI8j+bpGg=",
            "clientID": "5237-127.0.0.1@DEFAULT", "consumerGroup": "", "producerGroup": "PG"}, b""),
    ("", {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "Sf55A+YZN21izFtJZ+36oINzoLw=",
          "topic": "TopicA"}, b""),
]


@pytest.mark.parametrize(("secret", "fields", "body"), CPP_SIGNED)
def test_signatures_of_the_cpp_client_verify(secret, fields, body):
    assert sign(secret, fields, body) == fields["Signature"]
    assert verify(secret, fields, body)
    assert not verify(secret + "x", fields, body)
    assert not verify(secret, {**fields, "topic": "Other"}, body)
    assert not verify(secret, fields, body + b"!")


def test_signing_content_is_sorted_values_then_body():
    assert signing_content({"b": "2", "a": "1", "Signature": "zzz"}, b"BODY") == b"12BODY"


def test_signed_fields_add_access_key_and_signature():
    fields = signed_fields("ak", "sk", {"topic": "T"}, b"x")
    assert fields["AccessKey"] == "ak" and verify("sk", fields, b"x")


ACL = """
# comment
globalWhiteRemoteAddresses:
  - 10.1.*
accounts:
  - accessKey: alice
    secretKey: "s1"   # quoted
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicA=PUB|SUB
      - TopicB=SUB
    groupPerms: [G2=DENY]
  - accessKey: root
    secretKey: s2
    admin: true
"""


def _signed(code, fields, secret="s1", ak="alice", body=b""):
    return RemotingCommand(code=code, ext_fields=signed_fields(ak, secret, fields, body), body=body)


def test_yaml_subset_reads_plain_acl_shape():
    data = parse_yaml_subset(ACL)
    assert data["globalWhiteRemoteAddresses"] == ["10.1.*"]
    assert data["accounts"][0] == {"accessKey": "alice", "secretKey": "s1", "admin": False,
                                   "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB",
                                   "topicPerms": ["TopicA=PUB|SUB", "TopicB=SUB"], "groupPerms": ["G2=DENY"]}
    assert data["accounts"][1]["admin"] is True


def test_acl_checker_decisions(tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    checker = AclChecker(AclConfig.load(path))
    send = RequestCode.SEND_MESSAGE
    assert checker.check(_signed(send, {"topic": "TopicA"}), "127.0.0.1") is None
    assert "no PUB permission on topic TopicB" in checker.check(_signed(send, {"topic": "TopicB"}), "127.0.0.1")
    assert "signature" in checker.check(_signed(send, {"topic": "TopicA"}, secret="bad"), "127.0.0.1")
    assert "unknown AccessKey" in checker.check(_signed(send, {"topic": "TopicA"}, ak="bob"), "127.0.0.1")
    assert "no AccessKey" in checker.check(RemotingCommand(send, ext_fields={"topic": "TopicA"}), "127.0.0.1")
    assert checker.check(RemotingCommand(send, ext_fields={"topic": "TopicB"}), "10.1.2.3") is None
    pull = {"topic": "%RETRY%G1", "consumerGroup": "G1"}
    assert checker.check(_signed(RequestCode.PULL_MESSAGE, pull), "127.0.0.1") is None
    assert "group G2" in checker.check(_signed(RequestCode.PULL_MESSAGE, {"topic": "TopicA",
                                                                          "consumerGroup": "G2"}), "127.0.0.1")
    heartbeat = json.dumps({"clientID": "c", "consumerDataSet": [
        {"groupName": "G1", "subscriptionDataSet": [{"topic": "TopicC", "subString": "*"}]}]}).encode()
    assert "topic TopicC" in checker.check(_signed(RequestCode.HEART_BEAT, {}, body=heartbeat), "127.0.0.1")
    create = _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "X"})
    assert "admin" in checker.check(create, "127.0.0.1")
    assert checker.check(_signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "X"}, "s2", "root"), "1.2.3.4") is None


def test_acl_file_errors(tmp_path):
    path = tmp_path / "acl.yml"
    path.write_text("accounts:\n  - accessKey: a\n    secretKey: b\n    defaultTopicPerm: MAYBE\n")
    with pytest.raises(AclConfigError, match="MAYBE"):
        AclConfig.load(path)
    with pytest.raises(AclConfigError):
        AclConfig.load(tmp_path / "missing.yml")


def test_fastjson_unquoted_integer_keys_are_read():
    body = b'{"offsetTable":{"T@G":{0:250,1:251}},"s":"{0:not a key}","n":[1, 2]}'
    assert decode_json_body(body) == {"offsetTable": {"T@G": {"0": 250, "1": 251}}, "s": "{0:not a key}",
                                      "n": [1, 2]}
    with pytest.raises(RemoteProtocolError):
        decode_json_body(b"{oops")


def test_route_body_names_one_master():
    route = json.loads(topic_route_body(4, "b", "c", "127.0.0.1:10911"))
    assert route["brokerDatas"] == [{"brokerAddrs": {"0": "127.0.0.1:10911"}, "brokerName": "b", "cluster": "c"}]
    assert route["queueDatas"][0]["readQueueNums"] == route["queueDatas"][0]["writeQueueNums"] == 4


def test_batch_body_layout():
    data = encode_batch_body([BatchItem(5, b"ab", "K\x01V")])
    assert data == BATCH_FIXED.pack(BATCH_FIXED.size + 2 + 2 + 3, 0, 0, 5, 2) + b"ab" + b"\x00\x03K\x01V"
    for cut in range(1, len(data)):
        with pytest.raises(RemoteProtocolError):
            decode_batch_body(data[:cut])


items = st.builds(BatchItem, st.integers(-2**31, 2**31 - 1), st.binary(max_size=40),
                  st.text(alphabet="abcXYZ\x01\x02 ", max_size=30))


@settings(max_examples=200, deadline=None)
@given(st.lists(items, max_size=5))
def test_batch_round_trip(batch):
    assert decode_batch_body(encode_batch_body(batch)) == batch


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_batch_decoder_never_raises_anything_else(blob):
    try:
        decode_batch_body(blob)
    except RemoteProtocolError:
        pass
