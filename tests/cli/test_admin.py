"""`rocketstore admin` against a running `rocketstore serve`: every command once, in a real process, its
tab-separated output (what a pipe gets) and JSON Lines checked, and what the broker then holds checked
with our own remoting client or in the store's files."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.admin_client import decode_mq_keyed_body, mq_of
from rocketstore.protocol.bodies import decode_json_body
from rocketstore.protocol.client import RemotingClient
from rocketstore.testing import RunningBroker, rocketmq_broker
from tests.broker.broker_support import free_port
from tests.cli.cliharness import CliResult, assert_one_line_error, run_cli

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def served() -> Iterator[RunningBroker]:
    with rocketmq_broker(topics=["Seeded:2"], grpc=False) as broker:
        yield broker


def admin(broker: RunningBroker, *args: str) -> CliResult:
    return run_cli("admin", *args, "-n", broker.namesrv_addr)


def test_topic_commands_create_route_list_and_delete(served: RunningBroker) -> None:
    created = admin(served, "update-topic", "-t", "Orders", "-r", "3", "-w", "3", "--type", "FIFO").tsv()
    assert created == [{"broker": "broker-a", "address": served.broker_addr, "topic": "Orders",
                        "read queues": "3", "write queues": "3", "perm": "RW", "message type": "FIFO"}]
    with RemotingClient(served.broker_addr) as client:  # topics.json is written at the next flush
        topics = decode_json_body(client.request(RequestCode.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    assert topics["Orders"]["attributes"] == {"message.type": "FIFO"}
    assert topics["Orders"]["writeQueueNums"] == 3
    with RemotingClient(served.broker_addr) as client:  # the broker refuses attributes it cannot read
        for bad in ("+message.type=LITE", "message.type=FIFO", "+=FIFO"):
            answer = client.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "Orders", "attributes": bad})
            assert answer.code == ResponseCode.SYSTEM_ERROR, (bad, answer.remark)

    listed = [row["topic"] for row in admin(served, "topic-list").tsv()]
    assert {"Orders", "Seeded", "TBW102", "SCHEDULE_TOPIC_XXXX"} <= set(listed) and listed == sorted(listed)
    route = admin(served, "topic-route", "-t", "Orders", "--json").json_lines()
    assert route == [{"broker_name": "broker-a", "broker_addr": served.broker_addr, "read_queues": 3,
                      "write_queues": 3, "perm": 6, "topic_sys_flag": 0}]
    assert admin(served, "update-topic", "-t", "Orders", "-b", served.broker_addr, "-p", "4", "-r", "3",
                 "-w", "3").code == 0
    assert admin(served, "topic-route", "-t", "Orders").tsv()[0]["perm"] == "R"

    deleted = admin(served, "delete-topic", "-t", "Orders").tsv()
    assert [(row["deleted from"], row["address"]) for row in deleted] == [
        ("broker", served.broker_addr), ("name server", served.namesrv_addr)]
    assert "Orders" not in [row["topic"] for row in admin(served, "topic-list").tsv()]
    line = assert_one_line_error(admin(served, "topic-route", "-t", "Orders"), code=1)
    assert "TOPIC_NOT_EXIST" in line and "Orders" in line


def test_send_then_query_by_key_id_and_offset_and_topic_status(served: RunningBroker) -> None:
    sent = dict(row.values() for row in admin(served, "send-message", "-t", "Seeded", "-p", "hello admin",
                                              "-k", "order-1", "-c", "TagA", "-i", "1").tsv())
    assert (sent["status"], sent["broker_name"], sent["queue_id"]) == ("SEND_OK", "broker-a", "1")
    sent2 = admin(served, "send-message", "-t", "Seeded", "-p", "second", "-k", "order-1", "-i", "0",
                  "--json").json()
    assert sent2["queue_offset"] == 0 and sent2["status"] == "SEND_OK"

    found = admin(served, "query-msg-by-key", "-t", "Seeded", "-k", "order-1").tsv()
    assert sorted((row["queue"], row["body"], row["tags"]) for row in found) == [
        ("0", "second", ""), ("1", "hello admin", "TagA")]
    by_id = admin(served, "query-msg-by-id", "-i", sent["offset_msg_id"], "--json").json()
    assert (by_id["body"], by_id["uniq_key"], by_id["keys"]) == ("hello admin", sent["msg_id"], ["order-1"])
    by_uniq = admin(served, "query-msg-by-id", "-i", sent2["msg_id"], "-t", "Seeded", "--json").json()
    assert by_uniq["body"] == "second" and by_uniq["msg_id"] == sent2["offset_msg_id"]
    at = admin(served, "query-msg-by-offset", "-t", "Seeded", "-i", sent["queue_id"], "-o", sent["queue_offset"],
               "--json").json()
    assert (at["body"], at["broker_name"], at["queue_id"]) == ("hello admin", "broker-a", 1)
    missing = admin(served, "query-msg-by-offset", "-t", "Seeded", "-i", "1", "-o", "99")
    assert "no message at offset 99" in assert_one_line_error(missing, code=1)
    assert admin(served, "query-msg-by-key", "-t", "Seeded", "-k", "nobody").tsv() == []

    status = admin(served, "topic-status", "-t", "Seeded", "--json").json_lines()
    assert [(r["queue_id"], r["min_offset"], r["max_offset"]) for r in status] == [(0, 0, 1), (1, 0, 1)]
    assert all(abs(r["last_update_timestamp"] - time.time() * 1000) < 60_000 for r in status)


def _commit(broker: RunningBroker, group: str, topic: str, offsets: list[int]) -> None:
    with RemotingClient(broker.broker_addr) as client:
        for queue_id, offset in enumerate(offsets):
            assert client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset,
            }).code == ResponseCode.SUCCESS


def test_groups_progress_and_offline_reset(served: RunningBroker) -> None:
    admin(served, "update-topic", "-t", "Progress", "-r", "2", "-w", "2")
    for i in range(6):
        assert admin(served, "send-message", "-t", "Progress", "-p", f"m{i}", "-i", str(i % 2)).code == 0
    made = admin(served, "update-sub-group", "-g", "GAdmin", "-r", "3", "--broadcast").tsv()
    assert made[0]["retry max times"] == "3" and made[0]["broadcast"] == "true"
    groups = json.loads((served.store_path / "config" / "subscriptionGroup.json").read_text())
    assert groups["subscriptionGroupTable"]["GAdmin"]["retryMaxTimes"] == 3
    assert groups["subscriptionGroupTable"]["GAdmin"]["consumeBroadcastEnable"] is True

    _commit(served, "GAdmin", "Progress", [3, 1])
    progress = admin(served, "consumer-progress", "-g", "GAdmin").tsv()
    assert [(r["topic"], r["queue"], r["broker offset"], r["consumer offset"], r["diff"]) for r in progress] == [
        ("Progress", "0", "3", "3", "0"), ("Progress", "1", "3", "1", "2")]
    piped = admin(served, "consumer-progress", "-g", "GAdmin")
    assert "diff total: 2" in piped.err  # the footer goes to stderr in a pipe

    reset = admin(served, "reset-offset-by-time", "-g", "GAdmin", "-t", "Progress", "-s", "0", "--json")
    rows = reset.json_lines()
    assert [(r["queue_id"], r["consumer_offset"], r["timestamp_offset"], r["reset_offset"], r["how"])
            for r in rows] == [(0, 3, 0, 0, "offset committed"), (1, 1, 0, 0, "offset committed")]
    after = admin(served, "consumer-progress", "-g", "GAdmin", "-t", "Progress", "--json").json_lines()
    assert [r["consumer_offset"] for r in after] == [0, 0] and sum(r["diff"] for r in after) == 6
    forward = admin(served, "reset-offset-by-time", "-g", "GAdmin", "-t", "Progress", "-s", "now",
                    "--no-force").tsv()
    assert [r["reset to"] for r in forward] == ["0", "0"]  # without force, never forward
    admin(served, "reset-offset-by-time", "-g", "GAdmin", "-t", "Progress", "-s", "2999-01-01#00:00:00:000")
    assert [r["consumer_offset"] for r in admin(served, "consumer-progress", "-g", "GAdmin", "--json")
            .json_lines()] == [3, 3]

    gone = admin(served, "delete-sub-group", "-g", "GAdmin", "-b", served.broker_addr).tsv()
    assert gone == [{"broker": "broker-a", "address": served.broker_addr, "group": "GAdmin"}]
    groups = json.loads((served.store_path / "config" / "subscriptionGroup.json").read_text())
    assert "GAdmin" not in groups["subscriptionGroupTable"]


def test_cluster_list_and_broker_status(served: RunningBroker) -> None:
    clusters = admin(served, "cluster-list", "--json").json_lines()
    assert len(clusters) == 1
    row = clusters[0]
    assert (row["cluster"], row["broker_name"], row["broker_id"], row["addr"]) == (
        "DefaultCluster", "broker-a", 0, served.broker_addr)
    assert row["version"] == "V5_1_0" and isinstance(row["put_tps"], float)
    status = dict((r["field"], r["value"]) for r in admin(served, "broker-status", "-b", served.broker_addr).tsv())
    assert status["brokerVersionDesc"] == "V5_1_0" and int(status["commitLogMaxOffset"]) >= 0
    every = admin(served, "broker-status", "--json").json_lines()
    assert {r["broker_addr"] for r in every} == {served.broker_addr}
    assert {r["field"] for r in every} == set(status)


def test_failures_are_one_line_with_an_exit_code(served: RunningBroker, tmp_path: Path) -> None:
    closed = f"127.0.0.1:{free_port()}"
    line = assert_one_line_error(run_cli("admin", "topic-list", "-n", closed, "--timeout", "2"), code=1)
    assert closed in line and "did not answer" in line
    line = assert_one_line_error(run_cli("admin", "broker-status", "-b", closed), code=1)
    assert closed in line
    refused = admin(served, "update-topic", "-t", "bad topic!", "-b", served.broker_addr)
    assert "SYSTEM_ERROR" in assert_one_line_error(refused, code=1)
    line = assert_one_line_error(run_cli("admin", "topic-list", env={"NAMESRV_ADDR": ""}), code=2)
    assert "-n/--namesrv" in line
    line = assert_one_line_error(admin(served, "topic-list", "--access-key", "ak"), code=2)
    assert "--secret-key" in line
    line = assert_one_line_error(admin(served, "query-msg-by-id", "-i", "nothex"), code=2)
    assert "not an offset message id" in line
    assert_one_line_error(admin(served, "update-topic", "-t", "T", "--type", "LITE"), code=2)
    assert admin(served, "topic-list", "--access-key", "ak", "--secret-key", "sk").code == 0  # no ACL: ignored


ACL_YAML = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: operator
    secretKey: "operator-secret-1"
    admin: true
  - accessKey: reader
    secretKey: "reader-secret-1"
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


def test_acl_keys_sign_every_request(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YAML)
    with rocketmq_broker(grpc=False, extra_args=["--acl", str(acl)]) as broker:
        def as_user(key: str | None, secret: str | None, *args: str) -> CliResult:
            keys = ("--access-key", key, "--secret-key", secret) if key and secret else ()
            return admin(broker, *args, *keys)

        unsigned = as_user(None, None, "update-topic", "-t", "Guarded", "-b", broker.broker_addr)
        assert "NO_PERMISSION" in assert_one_line_error(unsigned, code=1)
        wrong = as_user("operator", "not-the-secret", "update-topic", "-t", "Guarded", "-b", broker.broker_addr)
        assert "NO_PERMISSION" in assert_one_line_error(wrong, code=1)
        reader = as_user("reader", "reader-secret-1", "update-topic", "-t", "Guarded", "-b", broker.broker_addr)
        assert "NO_PERMISSION" in assert_one_line_error(reader, code=1)
        made = as_user("operator", "operator-secret-1", "update-topic", "-t", "Guarded", "-b", broker.broker_addr)
        assert made.tsv()[0]["topic"] == "Guarded"
        assert "Guarded" in [r["topic"] for r in as_user("operator", "operator-secret-1", "topic-list").tsv()]


@pytest.mark.parametrize("body, name, expected", [
    # fastjson's map keyed by MessageQueue objects, the way RocketMQ's broker writes ConsumeStats
    (b'{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":5},'
     b'{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":7}}}', "offsetTable",
     {("T", "broker-a", 0): {"brokerOffset": 7}, ("T", "broker-a", 1): {"brokerOffset": 5}}),
    # a ResetOffsetBody, and an integer key fastjson leaves unquoted elsewhere in the body
    (b'{"offsetTable":{{"brokerName":"b","queueId":3,"topic":"%RETRY%G"}:12},"x":{0:"a"}}', "offsetTable",
     {("%RETRY%G", "b", 3): 12}),
    (b'{"offsetTable":{}}', "offsetTable", {}),
    # an object value after a comma is not a key
    (b'{"offsetTable":{},"list":[{"a":1},{"b":"}:"}]}', "offsetTable", {}),
])
def test_message_queue_keyed_bodies_decode(body: bytes, name: str, expected: dict) -> None:
    data = decode_mq_keyed_body(body)
    assert {mq_of(key): value for key, value in data[name].items()} == expected


def test_json_before_the_subcommand_and_a_second_name_server(served: RunningBroker) -> None:
    before = run_cli("--json", "admin", "topic-route", "-t", "Seeded", "-n", served.namesrv_addr)
    assert before.json_lines()[0]["write_queues"] == 2
    closed = f"127.0.0.1:{free_port()}"
    fallback = run_cli("admin", "topic-route", "-t", "Seeded", "-n", f"{closed};{served.namesrv_addr}")
    assert fallback.tsv()[0]["broker"] == "broker-a"
    with_env = run_cli("admin", "topic-route", "-t", "Seeded", env={"NAMESRV_ADDR": served.namesrv_addr})
    assert with_env.tsv()[0]["write queues"] == "2"
