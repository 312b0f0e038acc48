"""The admin requests of `mqadmin` against `rocketstore serve`, beside the real RocketMQ 4.9.8 broker.

Each test runs one mqadmin command against both brokers, after the same producers and consumers ran on
both, and compares what it printed with times, addresses and versions masked (tests/broker/differential.py).
Both brokers start once for the module: JVM start-ups are slow.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from rocketstore.log.json_config import read_json
from tests.broker.broker_support import BrokerProcess, create_store
from tests.broker.differential import LAUNCHER, JavaBroker, mqadmin, normalise, require_java_broker, run_tool

SEEDED = 20  # messages of TopicA both brokers get, consumed by GroupA
RESET_MESSAGES = 100
SYSTEM_TOPICS = {"SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "TBW102",
                 "DefaultCluster", "broker-a", "DefaultCluster_REPLY_TOPIC"}
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # the Java broker's transaction check adds it a minute after start
# Runtime keys the Java broker prints that serve does not: latency histograms and timings of its
# thread pools and store internals, which serve does not measure.
RUNTIME_KEYS_NOT_KEPT = {"getMessageEntireTimeMax", "putMessageEntireTimeMax", "putMessageDistributeTime",
                         "putLatency99", "putLatency999"}


@dataclass
class Brokers:
    java: JavaBroker
    ours: BrokerProcess

    def both(self, *args: str) -> tuple[str, str]:
        """mqadmin ARGS against ours, then the Java one; `{ns}` and `{broker}` name each one's."""
        outputs = []
        for ns, broker in ((self.ours.namesrv, self.ours.addr), (self.java.namesrv, self.java.addr)):
            outputs.append(mqadmin(*(a.format(ns=ns, broker=broker) for a in args)))
        return outputs[0], outputs[1]

    def tool_both(self, *args: str) -> tuple[str, str]:
        """A producer or consumer of the client driver against each (`{ns}` the name server)."""
        return (run_tool(*(a.format(ns=self.ours.namesrv) for a in args)),
                run_tool(*(a.format(ns=self.java.namesrv) for a in args)))


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    require_java_broker()
    root = tmp_path_factory.mktemp("admin")
    java = JavaBroker(root / "java").start()
    ours = BrokerProcess(create_store(root / "store"), root / "serve.log").start()
    try:
        pair = Brokers(java, ours)
        for out in pair.tool_both("producer", "{ns}", "TopicA", str(SEEDED)):
            assert f'"sent":{SEEDED}' in out, out
        for out in pair.tool_both("consumer", "{ns}", "TopicA", "GroupA", "--expect", str(SEEDED), "--timeout",
                                  "60"):
            assert f'"received":{SEEDED}' in out, out
        yield pair
    finally:
        ours.stop()
        java.stop()


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line and not line.startswith("#")]


def test_cluster_list_and_broker_status_read_the_runtime_info(brokers: Brokers) -> None:
    """GET_BROKER_RUNTIME_INFO (28): clusterList fills its Version and TPS columns, brokerStatus prints the
    keys the Java broker prints (but the timings serve does not measure) with the counts of this run."""
    ours, java = brokers.both("clusterList", "-n", "{ns}")
    assert "Exception" not in ours, ours
    assert normalise(ours).splitlines()[0] == normalise(java).splitlines()[0]
    row = normalise(ours).splitlines()[1].split()
    assert row[:5] == ["DefaultCluster", "broker-a", "0", "<addr>", "<version>"], ours
    ours, java = brokers.both("brokerStatus", "-n", "{ns}", "-b", "{broker}")
    table = dict(re.findall(r"^(\S+)[ \t]*: (.*)$", ours, re.MULTILINE))
    java_keys = set(re.findall(r"^(\S+)[ \t]*:", java, re.MULTILINE))
    def per_path(keys: set[str]) -> set[str]:
        return {key.split("_/")[0] for key in keys}  # commitLogDiskRatio_<the store's commitlog folder>

    assert per_path(java_keys) - per_path(set(table)) == RUNTIME_KEYS_NOT_KEPT, (ours, java)
    assert int(table["msgPutTotalTodayNow"]) >= SEEDED and int(table["msgGetTotalTodayNow"]) >= SEEDED
    assert int(table["commitLogMaxOffset"]) > 0 and table["brokerVersionDesc"] == "V5_1_0"
    assert 0 < float(table["commitLogDiskRatio"]) <= 1


def test_topic_status_matches_the_java_broker(brokers: Brokers) -> None:
    """GET_TOPIC_STATS_INFO (202)."""
    ours, java = brokers.both("topicStatus", "-n", "{ns}", "-t", "TopicA")
    assert normalise(ours) == normalise(java)
    assert sorted(row[1] for row in _rows(ours)) == ["0", "1", "2", "3"]
    assert sum(int(row[3]) for row in _rows(ours)) == SEEDED


def test_consumer_progress_matches_the_java_broker(brokers: Brokers) -> None:
    """GET_CONSUME_STATS (208): broker and consumer offsets of each queue of the group's topics. The Java
    consumer commits its offsets now and then and once more, oneway, as it shuts down: whether the Java
    broker got the last commits (and the retry queue's) is a matter of timing, so its consumer offsets
    and its %RETRY% row are compared only when they are complete."""
    ours, java = brokers.both("consumerProgress", "-n", "{ns}", "-g", "GroupA")
    assert normalise(ours).splitlines()[0] == normalise(java).splitlines()[0]
    mine = [row for row in _rows(ours) if row[0] == "TopicA"]
    theirs = [row for row in _rows(java) if row[0] == "TopicA"]
    assert [row[:4] for row in mine] == [row[:4] for row in theirs], (ours, java)
    assert [(row[3], row[4], row[5]) for row in mine] == [("5", "5", "0")] * 4, ours
    if "Diff Total: 0" in java:
        assert [row[:6] for row in mine] == [row[:6] for row in theirs]
    assert ["%RETRY%GroupA", "broker-a", "0", "0", "0", "0", "N/A"] in _rows(ours)
    assert "Diff Total: 0" in ours and re.search(r"Consume TPS: \d+\.\d\d", ours)


def test_subscription_groups_are_created_read_persisted_and_deleted(brokers: Brokers) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
    DELETE_SUBSCRIPTIONGROUP (207); serve keeps them in config/subscriptionGroup.json."""
    ours, java = brokers.both("updateSubGroup", "-n", "{ns}", "-b", "{broker}", "-g", "G2", "-r", "3", "-m",
                              "false")
    assert normalise(ours) == normalise(java) and "success" in ours
    ours, java = brokers.both("getConsumerConfig", "-n", "{ns}", "-g", "G2")
    assert normalise(ours) == normalise(java)
    assert re.search(r"retryMaxTimes\s+=\s+3", ours), ours
    recorded = read_json(brokers.ours.store / "config" / "subscriptionGroup.json")
    assert recorded is not None and recorded["subscriptionGroupTable"]["G2"]["retryMaxTimes"] == 3
    ours, java = brokers.both("deleteSubGroup", "-n", "{ns}", "-c", "DefaultCluster", "-g", "G2")
    assert normalise(ours) == normalise(java)
    recorded = read_json(brokers.ours.store / "config" / "subscriptionGroup.json")
    assert recorded is not None and "G2" not in recorded["subscriptionGroupTable"]
    assert "GroupA" in recorded["subscriptionGroupTable"]  # created by its consumer's heartbeat (flushed)


def test_reset_offset_by_time_lets_a_restarted_consumer_read_again(brokers: Brokers) -> None:
    """INVOKE_BROKER_TO_RESET_OFFSET (222) with nobody online: CONSUMER_NOT_ONLINE, then mqadmin commits the
    offsets itself; the group's next consumer gets every message again, as on the Java broker."""
    for out in brokers.tool_both("producer", "{ns}", "TopicR", str(RESET_MESSAGES)):
        assert f'"sent":{RESET_MESSAGES}' in out, out
    for out in brokers.tool_both("consumer", "{ns}", "TopicR", "GroupR", "--expect", str(RESET_MESSAGES),
                                 "--timeout", "60"):
        assert f'"received":{RESET_MESSAGES}' in out, out
    ours, java = brokers.both("resetOffsetByTime", "-n", "{ns}", "-g", "GroupR", "-t", "TopicR", "-s", "0")
    assert normalise(ours).splitlines()[0] == normalise(java).splitlines()[0]  # "rollback consumer offset ..."

    def table(text: str) -> list[list[str]]:  # brokerName, queueId, brokerOffset, timestampOffset, rollbackOffset
        return sorted(row[:3] + row[4:] for row in _rows(text) if len(row) == 6 and row[0] == "broker-a")

    # the consumer offset column is left out: the Java consumer's last commits may not have landed
    assert table(ours) == table(java) and len(table(ours)) == 4, (ours, java)
    assert [row[3:] for row in _rows(ours) if len(row) == 6 and row[0] == "broker-a"] == [["25", "0", "0"]] * 4
    again = run_tool("consumer", brokers.ours.namesrv, "TopicR", "GroupR", "--expect", str(RESET_MESSAGES),
                     "--timeout", "60")
    assert f'"received":{RESET_MESSAGES}' in again, again


def test_delete_topic_removes_its_queues_and_route(brokers: Brokers) -> None:
    """DELETE_TOPIC_IN_BROKER (215) and DELETE_TOPIC_IN_NAMESRV (216)."""
    for out in brokers.tool_both("producer", "{ns}", "TopicD", "8"):
        assert '"sent":8' in out, out
    assert (brokers.ours.store / "consumequeue" / "TopicD").is_dir()
    ours, java = brokers.both("deleteTopic", "-n", "{ns}", "-c", "DefaultCluster", "-t", "TopicD")
    assert normalise(ours) == normalise(java)
    assert "delete topic [TopicD] from NameServer success." in ours
    assert not (brokers.ours.store / "consumequeue" / "TopicD").exists()
    ours, java = brokers.both("topicList", "-n", "{ns}")
    assert "TopicD" not in ours.split() and "TopicD" not in java.split()
    ours, _ = brokers.both("deleteTopic", "-n", "{ns}", "-c", "DefaultCluster", "-t", "SELF_TEST_TOPIC")
    assert "success" not in ours and "conflict with system topic" in ours, ours


def test_broker_and_name_server_config_use_rocketmq_names(brokers: Brokers) -> None:
    """GET_BROKER_CONFIG (26) and GET_NAMESRV_CONFIG (319): every setting serve prints is one the Java
    broker or name server prints, under the same name."""
    def keys(text: str) -> dict[str, str]:
        return dict(re.findall(r"^(\w+)[ \t]+=[ \t]+(.*)$", text, re.MULTILINE))

    ours, java = brokers.both("getBrokerConfig", "-n", "{ns}", "-b", "{broker}")
    mine, theirs = keys(ours), keys(java)
    assert mine["brokerName"] == theirs["brokerName"] == "broker-a"
    assert mine["brokerClusterName"] == "DefaultCluster" and mine["brokerRole"] == "ASYNC_MASTER"
    assert mine["storePathRootDir"] == str(brokers.ours.store)
    assert set(mine) <= set(theirs), set(mine) - set(theirs)
    ours, java = brokers.both("getNamesrvConfig", "-n", "{ns}")
    mine, theirs = keys(ours), keys(java)
    assert mine["listenPort"] == str(brokers.ours.namesrv.rpartition(":")[2])
    assert set(mine) <= set(theirs), set(mine) - set(theirs)


def test_topic_list_names_the_system_topics(brokers: Brokers) -> None:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) lists the topics RocketMQ's broker registers for itself."""
    ours, java = brokers.both("topicList", "-n", "{ns}")
    mine, theirs = set(normalise(ours).split()), set(normalise(java).split())
    assert SYSTEM_TOPICS | {TRANS_HALF_TOPIC} <= mine and SYSTEM_TOPICS <= theirs
    assert mine - {TRANS_HALF_TOPIC} == theirs - {TRANS_HALF_TOPIC}


def test_the_store_records_what_the_answers_said(brokers: Brokers) -> None:
    """The offsets mqadmin's reset committed and the group a heartbeat created are on disk in RocketMQ's
    files."""
    offsets = read_json(brokers.ours.store / "config" / "consumerOffset.json")
    assert offsets is not None and "TopicR@GroupR" in offsets["offsetTable"]
    deadline = time.monotonic() + 15  # a heartbeat's group is written by the broker's next periodic flush
    while True:
        groups = read_json(brokers.ours.store / "config" / "subscriptionGroup.json")
        if groups is not None and "GroupR" in groups["subscriptionGroupTable"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert groups is not None and groups["subscriptionGroupTable"]["GroupR"]["retryMaxTimes"] == 16


_CLIENT_IDS = re.compile(r"\S+@drv-\d+")


def test_connections_and_message_tracks_while_a_consumer_is_online(brokers: Brokers) -> None:
    """GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204) and the track of
    queryMsgByOffset (QUERY_TOPIC_CONSUME_BY_WHO, 300), offline and online."""
    ours, java = brokers.both("queryMsgByOffset", "-n", "{ns}", "-t", "TopicA", "-b", "broker-a", "-i", "0", "-o", "0")
    track = "MessageTrack [consumerGroup=GroupA, trackType=NOT_ONLINE, exceptionDesc=CODE:206 DESC:the consumer " \
            "group[GroupA] not online]"
    assert track in ours and track in java, (ours, java)
    labels = re.compile(r"^([A-Z][\w ]+):", re.MULTILINE)
    assert labels.findall(ours) == labels.findall(java)
    ours, java = brokers.both("producerConnection", "-n", "{ns}", "-g", "NoSuchProducer", "-t", "TopicA")
    assert "the producer group[NoSuchProducer] not exist" in ours and "not exist" in java
    consumers = [subprocess.Popen([str(LAUNCHER), "consumer", ns, "TopicA", "GroupA", "--timeout", "90"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for ns in (brokers.ours.namesrv, brokers.java.namesrv)]
    try:
        deadline = time.monotonic() + 60
        while True:
            ours, java = brokers.both("consumerConnection", "-n", "{ns}", "-g", "GroupA")
            if ("#ClientId" in ours and "#ClientId" in java) or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert _CLIENT_IDS.sub("<client>", normalise(ours)) == _CLIENT_IDS.sub("<client>", normalise(java))
        assert "ConsumeType: CONSUME_PASSIVELY" in ours and re.search(r"TopicA\s+\*", ours)
        ours, java = brokers.both("queryMsgByOffset", "-n", "{ns}", "-t", "TopicA", "-b", "broker-a", "-i", "0",
                                  "-o", "0")
        online = "MessageTrack [consumerGroup=GroupA, trackType=CONSUMED, exceptionDesc=null]"
        assert online in ours and online in java, (ours, java)
    finally:
        for proc in consumers:
            proc.terminate()
            proc.wait(30)


def test_broker_consume_stats_consume_queue_and_stats_all(brokers: Brokers) -> None:
    """GET_BROKER_CONSUME_STATS (317), QUERY_CONSUME_QUEUE (321) and VIEW_BROKER_STATS_DATA (315, which
    statsAll reads for its 24-hour counts)."""
    ours, java = brokers.both("brokerConsumeStats", "-n", "{ns}", "-b", "{broker}")
    # GroupA's queues and broker offsets: the same on both (consumer offsets can differ when the Java
    # consumer's last commit did not land; GroupR's: only serve's consumer read TopicR again after the reset)
    mine = [row[:5] for row in _rows(ours) if row[1:2] == ["GroupA"]]
    assert mine == [row[:5] for row in _rows(java) if row[1:2] == ["GroupA"]] and len(mine) == 4, (ours, java)
    assert all(row[4] == row[5] == "5" for row in _rows(ours) if row[1:2] == ["GroupA"]), ours
    assert normalise(ours).splitlines()[0] == normalise(java).splitlines()[0]
    assert "Diff Total: 0" in ours
    ours, java = brokers.both("queryCq", "-n", "{ns}", "-t", "TopicA", "-q", "0", "-i", "0", "-c", "3", "-g",
                              "GroupA")
    offsets = re.compile(r"physicOffset=\d+, physicSize=\d+")  # where each record landed differs
    assert offsets.sub("<entry>", normalise(ours)) == offsets.sub("<entry>", normalise(java))
    assert ours.count("ConsumeQueueData{") == 3 and "tagsCode=2598919" in ours  # "TagA".hashCode()
    ours, java = brokers.both("statsAll", "-n", "{ns}")
    row = re.compile(r"^TopicA\s+GroupA\s+.*$", re.MULTILINE)
    assert len(row.findall(ours)) == len(row.findall(java)) == 1, (ours, java)
    # the 24-hour counts: the Java broker's lag behind its hourly samples (0 in a broker not an hour old)
    assert row.findall(ours)[0].split()[-2:] == [str(SEEDED), str(SEEDED)]


def test_kv_config_is_set_and_deleted_on_the_name_server(brokers: Brokers) -> None:
    """PUT_KV_CONFIG (100) and DELETE_KV_CONFIG (102): serve keeps them in config/kvConfig.json, as
    RocketMQ's name server keeps its kvConfig.json."""
    ours, java = brokers.both("updateKvConfig", "-n", "{ns}", "-s", "NS1", "-k", "k1", "-v", "v1")
    assert normalise(ours) == normalise(java) == "create or update kv config to namespace success."
    recorded = read_json(brokers.ours.store / "config" / "kvConfig.json")
    assert recorded == {"configTable": {"NS1": {"k1": "v1"}}}
    ours, java = brokers.both("deleteKvConfig", "-n", "{ns}", "-s", "NS1", "-k", "k1")
    assert normalise(ours) == normalise(java) == "delete kv config from namespace success."
    assert read_json(brokers.ours.store / "config" / "kvConfig.json") == {"configTable": {"NS1": {}}}
