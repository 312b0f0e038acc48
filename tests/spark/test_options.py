"""Option parsing: Kafka-style offsets, paths, geometry, and ValueErrors that name the bad option."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore.spark.options import EARLIEST, LATEST, OffsetSpec, ReadOptions, StreamOptions, WriteOptions

pytestmark = pytest.mark.spark


def test_offsets_json_gives_per_queue_offsets_and_default_for_others() -> None:
    spec = OffsetSpec.parse("startingOffsets", '{"TopicA": {"0": 5, "1": -2}, "TopicB": {"3": -1}}', EARLIEST)
    assert spec.for_queue("TopicA", 0) == 5
    assert spec.for_queue("TopicA", 1) == EARLIEST
    assert spec.for_queue("TopicB", 3) == LATEST
    assert spec.for_queue("TopicC", 0) == EARLIEST


@pytest.mark.parametrize("word, value", [("earliest", EARLIEST), ("LATEST", LATEST), ("", EARLIEST)])
def test_offsets_words(word: str, value: int) -> None:
    assert OffsetSpec.parse("startingOffsets", word, EARLIEST).default == value


@pytest.mark.parametrize(
    "options, option_name",
    [
        ({"scan": "everything"}, "scan"),
        ({"startingOffsets": "{not json"}, "startingOffsets"),
        ({"endingOffsets": '{"TopicA": 3}'}, "endingOffsets"),
        ({"endingOffsets": '{"TopicA": {"x": 3}}'}, "endingOffsets"),
        ({"endingOffsets": "earliest"}, "endingOffsets"),
        ({"startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({"startingTimestamp": "10", "endingTimestamp": "5"}, "endingTimestamp"),
        ({"commitlogFileSize": "big"}, "commitlogFileSize"),
        ({"indexMaxEntries": "0"}, "indexMaxEntries"),
        ({"messagesPerPartition": "-4"}, "messagesPerPartition"),
    ],
)
def test_bad_read_option_names_the_option(tmp_path: Path, options: dict[str, str], option_name: str) -> None:
    with pytest.raises(ValueError, match=f"'{option_name}'"):
        ReadOptions.parse({"path": str(tmp_path), **options})


def test_missing_path_names_path() -> None:
    with pytest.raises(ValueError, match="'path'"):
        ReadOptions.parse({})


def test_paths_split_on_commas_and_expand_globs(tmp_path: Path) -> None:
    for name in ("b1", "b2", "other"):
        (tmp_path / name).mkdir()
    opts = ReadOptions.parse({"path": f"{tmp_path}/b*, {tmp_path}/other"})
    assert opts.paths == (str(tmp_path / "b1"), str(tmp_path / "b2"), str(tmp_path / "other"))


def test_glob_matching_nothing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'path'"):
        ReadOptions.parse({"path": f"{tmp_path}/nothing-*"})


def test_read_options_are_case_insensitive_and_typed(tmp_path: Path) -> None:
    opts = ReadOptions.parse(
        {
            "PATH": str(tmp_path),
            "Topics": "TopicA, TopicB",
            "startingtimestamp": "100",
            "SCAN": "CommitLog",
            "commitLogFileSize": "65536",
            "consumeQueueFileEntries": "100",
        }
    )
    assert opts.topics == ("TopicA", "TopicB")
    assert opts.starting_timestamp_ms == 100
    assert opts.scan == "commitlog"
    assert dict(opts.geometry) == {"commitlog_file_size": 65536, "consume_queue_file_entries": 100}
    assert opts.keeps_time(100) and not opts.keeps_time(99)


def test_stream_options_default_to_latest_and_reject_batch_only_options(tmp_path: Path) -> None:
    opts = StreamOptions.parse({"path": str(tmp_path), "maxMessagesPerTrigger": "7", "failOnDataLoss": "false"})
    assert opts.starting.default == LATEST
    assert opts.max_messages_per_trigger == 7
    assert opts.fail_on_data_loss is False
    with pytest.raises(ValueError, match="'endingoffsets'"):
        StreamOptions.parse({"path": str(tmp_path), "endingOffsets": "latest"})
    with pytest.raises(ValueError, match="'failOnDataLoss'"):
        StreamOptions.parse({"path": str(tmp_path), "failOnDataLoss": "maybe"})
    with pytest.raises(ValueError, match="'maxMessagesPerTrigger'"):
        StreamOptions.parse({"path": str(tmp_path), "maxMessagesPerTrigger": "0"})


def test_write_options_need_exactly_one_store(tmp_path: Path) -> None:
    opts = WriteOptions.parse({"path": str(tmp_path), "topic": "TopicA"})
    assert opts.path == str(tmp_path) and opts.topic == "TopicA"
    assert opts.staging_root == str(tmp_path / "spark-staging")
    with pytest.raises(ValueError, match="'path'"):
        WriteOptions.parse({"path": f"{tmp_path},{tmp_path}"})
    with pytest.raises(ValueError, match="'sinkId'"):
        WriteOptions.parse({"path": str(tmp_path), "sinkId": "../evil"})


def test_write_option_broker_needs_an_address_and_a_staging_dir_outside_the_store(tmp_path) -> None:
    store, staging = str(tmp_path / "store"), str(tmp_path / "staging")
    opts = WriteOptions.parse({"path": store, "broker": " 127.0.0.1:10911 ", "stagingDir": staging})
    assert (opts.broker, opts.staging_root) == ("127.0.0.1:10911", staging)
    assert WriteOptions.parse({"path": store}).broker is None
    for bad in ("localhost", "host:", "host:port", "127.0.0.1:0", "127.0.0.1:70000", ":10911"):
        with pytest.raises(ValueError, match="Option 'broker'"):
            WriteOptions.parse({"path": store, "broker": bad, "stagingDir": staging})
    with pytest.raises(ValueError, match="Option 'stagingDir' is required with option 'broker'"):
        WriteOptions.parse({"path": store, "broker": "127.0.0.1:10911"})
    with pytest.raises(ValueError, match="Option 'stagingDir' .* must lie outside the store"):
        WriteOptions.parse({"path": store, "broker": "127.0.0.1:10911", "stagingDir": store + "/staging"})
