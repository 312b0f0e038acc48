"""Hostile values for every argument of the store's public calls and of `Message`: None, bools, floats,
negative and huge ints, strs where ints go, bytes, lists and dicts of junk. Whatever a call is given, it
answers or raises a RocketStoreError (never a bare TypeError, AttributeError or ValueError), and
afterwards every message stored before, and every message a hostile put did store, reads back after a
reopen, with the consumer offsets committed. The suite runs this module in both modes: with the compiled
module, and with ROCKETSTORE_PURE_PYTHON=1 (the pure-Python twins)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import InvalidArgumentError, InvalidMessageError, InvalidMessageTypeError, RocketStoreError
from rocketstore.native import speedups
from rocketstore.store.prepare import Preparer, checked_topic

CONFIG = StoreConfig(commitlog_file_size=1 << 20, consume_queue_file_entries=64, index_hash_slots=64,
                     index_max_entries=4096)


class Opaque:
    """An object of no type the store knows."""


JUNK = st.one_of(
    st.none(), st.booleans(), st.floats(), st.integers(-(2**70), 2**70),
    st.sampled_from([-1, 2**31, 2**63, -(2**63) - 1]),
    st.text(max_size=4), st.sampled_from(["", "\ud800", "@", "5", "T"]), st.binary(max_size=4),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=2)), max_size=3),
    st.dictionaries(st.text(max_size=2), st.one_of(st.integers(), st.none()), max_size=2),
    st.builds(Opaque), st.just(math.nan), st.just(memoryview(b"mv")),
)
INTS = st.one_of(st.integers(-2, 6), JUNK)
TOPICS = st.one_of(st.sampled_from(["T", "U", "%RETRY%G", "SCHEDULE_TOPIC_XXXX", "T" * 128]), JUNK)
KEYS = st.one_of(st.lists(st.sampled_from(["k0", "k1", "a b", ""]), max_size=2), JUNK)
PROPERTIES = st.one_of(st.none(), st.dictionaries(st.sampled_from(["A", "KEYS", "TAGS", "DELAY", "UNIQ_KEY", ""]),
                                                  st.one_of(st.sampled_from(["1", "v", "x\x01", "99"]), JUNK),
                                                  max_size=2), JUNK)


@st.composite
def messages(draw) -> Any:
    """A Message built from hostile fields (what its constructor refused, as the error it raised), or junk."""
    if draw(st.integers(0, 5)) == 0:
        return draw(JUNK)
    fields = dict(
        topic=draw(TOPICS), body=draw(st.one_of(st.binary(max_size=8), st.text(max_size=4), JUNK)),
        queue_id=draw(INTS), tags=draw(st.one_of(st.none(), st.sampled_from(["TagA", ""]), JUNK)), keys=draw(KEYS),
        properties=draw(PROPERTIES), flag=draw(INTS), born_timestamp=draw(st.one_of(st.none(), INTS)),
        born_host=draw(st.one_of(st.none(), st.sampled_from(["10.0.0.1:9", "[::1]:8", "[zz]:1", "x", "1.2.3.4:99999"]),
                                 JUNK)),
        sys_flag=draw(st.one_of(st.sampled_from([0, 4, 8, 12]), INTS)), reconsume_times=draw(INTS),
        prepared_transaction_offset=draw(INTS))
    chosen = draw(st.sets(st.sampled_from(sorted(fields))))
    try:
        return Message(fields["topic"], fields["body"], **{k: v for k, v in fields.items() if k in chosen - {
            "topic", "body"}})
    except RocketStoreError as exc:
        return exc


def _consume(answer: object) -> object:
    if hasattr(answer, "__next__"):
        return [m for _, m in zip(range(8), answer, strict=False)]  # type: ignore[call-overload]
    return answer


def _calls(data: st.DataObject | None) -> dict[str, Callable[[MessageStore], object]]:
    def draw(strategy: st.SearchStrategy[Any]) -> Any:
        assert data is not None
        return data.draw(strategy)
    return {
        "put": lambda s: s.put(draw(messages())),
        "put_nowait": lambda s: s.put_nowait(draw(messages())).result(),
        "put_batch": lambda s: s.put_batch(draw(st.one_of(st.lists(messages(), max_size=3), JUNK))),
        "check_message": lambda s: s.check_message(draw(messages())),
        "put_broker_records": lambda s: s.put_broker_records(draw(st.one_of(st.lists(messages(), max_size=2), JUNK))),
        "get": lambda s: s.get(draw(TOPICS), draw(INTS), draw(INTS), draw(st.one_of(st.integers(1, 40), INTS)),
                               tags=draw(st.one_of(st.none(), st.sampled_from(["*", "TagA || x"]), JUNK))),
        "scan": lambda s: s.scan(draw(st.one_of(st.none(), INTS)), draw(st.one_of(st.none(), INTS))),
        "query": lambda s: s.query(draw(TOPICS), draw(st.one_of(st.sampled_from(["k0", "k1"]), JUNK)),
                                   max_count=draw(INTS), begin_ms=draw(INTS), end_ms=draw(st.one_of(st.none(), INTS))),
        "index_lookup": lambda s: s.index_lookup(draw(TOPICS), draw(st.one_of(st.just("k0"), JUNK)),
                                                 max_count=draw(INTS), begin_ms=draw(INTS),
                                                 end_ms=draw(st.one_of(st.none(), INTS))),
        "message_at": lambda s: s.message_at(draw(INTS)),
        "message_by_id": lambda s: s.message_by_id(draw(st.one_of(
            st.sampled_from(["7F00000100002A9F0000000000000000", "zz"]), JUNK))),
        "commit_offset": lambda s: s.commit_offset(draw(st.one_of(st.just("H"), JUNK)), draw(TOPICS), draw(INTS),
                                                   draw(INTS)),
        "committed_offset": lambda s: s.committed_offset(draw(st.one_of(st.just("G"), JUNK)), draw(TOPICS),
                                                         draw(INTS)),
        "min_offset": lambda s: s.min_offset(draw(TOPICS), draw(INTS)),
        "max_offset": lambda s: s.max_offset(draw(TOPICS), draw(INTS)),
        "offset_by_time": lambda s: s.offset_by_time(draw(TOPICS), draw(INTS), draw(INTS)),
        "store_timestamp_at": lambda s: s.store_timestamp_at(draw(TOPICS), draw(INTS), draw(INTS)),
        "queue_entries": lambda s: s.queue_entries(draw(TOPICS), draw(INTS), draw(st.one_of(st.none(), INTS)),
                                                   draw(st.one_of(st.none(), INTS))),
        "iter_queue": lambda s: s.iter_queue(draw(TOPICS), draw(INTS), draw(st.one_of(st.none(), INTS)),
                                             draw(st.one_of(st.none(), INTS)), chunk=draw(INTS)),
        "ensure_topic": lambda s: s.ensure_topic(draw(TOPICS), draw(INTS)),
        "record_topic": lambda s: s.record_topic(draw(TOPICS), draw(INTS), draw(INTS), draw(INTS)),
        "add_arrival_listener": lambda s: s.add_arrival_listener(draw(st.one_of(st.just(print), JUNK)))(),
        "clean_expired": lambda s: s.clean_expired(draw(JUNK.filter(lambda v: not isinstance(v, int)))),
        "deliver_delayed": lambda s: s.deliver_delayed(draw(JUNK.filter(lambda v: not isinstance(v, int)))),
    }


CALL_NAMES = sorted(_calls(None))


def test_hostile_arguments_raise_only_rocketstore_errors_and_change_nothing_stored(tmp_path):
    stored: dict[int, bytes] = {}
    committed = {("G", "T", 0): 1}
    with MessageStore.open(tmp_path, CONFIG) as store:
        for i in range(3):
            result = store.put(Message("T", b"m%d" % i, keys=(f"k{i}",), tags="TagA"))
            stored[result.phy_offset] = b"m%d" % i
        store.commit_offset("G", "T", 0, 1)

        @settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(st.sampled_from(CALL_NAMES), st.data())
        def call_with_hostile_arguments(name: str, data: st.DataObject) -> None:
            call = _calls(data)[name]
            try:
                answer = _consume(call(store))
            except RocketStoreError:
                return
            results = answer if isinstance(answer, list) else [answer]
            for result in results:  # the puts that were taken: they must read back after the reopen
                if name.startswith("put") and getattr(result, "ok", False):
                    stored[result.phy_offset] = bytes(store.message_at(result.phy_offset).body)
            if name == "commit_offset":
                args = store.consumer_offsets()
                committed.update({(g, t, q): o for g, queues in args.items() for (t, q), o in queues.items()})

        call_with_hostile_arguments()
        assert [m.body for m in store.get("T", 0, 0, max_count=3).messages] == [b"m0", b"m1", b"m2"]
    with MessageStore.open(tmp_path, CONFIG) as reopened:
        for phy, body in stored.items():
            assert bytes(reopened.message_at(phy).body) == body
        assert [m.body for m in reopened.get("T", 0, 0, max_count=3).messages] == [b"m0", b"m1", b"m2"]
        assert {(g, t, q): o for g, queues in reopened.consumer_offsets().items()
                for (t, q), o in queues.items()} == committed
        assert reopened.put(Message("T", b"after")).ok


@pytest.mark.parametrize(("keys", "error"), [(5, InvalidMessageTypeError), (None, InvalidMessageTypeError),
                                             (Opaque(), InvalidMessageTypeError)])
def test_keys_message_cannot_take_raise_an_error_that_is_also_a_type_error(keys, error):
    with pytest.raises(error, match="keys must be a str or an iterable of str") as caught:
        Message("T", b"x", keys=keys)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, InvalidMessageError)


def _outcome(prepare: Callable[[Any], Any], message: Any) -> object:
    try:
        p = prepare(message)
    except RocketStoreError as exc:
        return type(exc)
    return (p.topic, p.queue_id, p.body, p.tail, p.size, p.flag, p.sys_flag, p.born_ip, p.born_port, p.keys,
            p.tags_code)


PREPARER = Preparer(CONFIG, bytes([127, 0, 0, 1]), CONFIG.delay_level_millis())


@pytest.mark.skipif(speedups is None, reason="the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
@settings(max_examples=400, deadline=None)
@given(messages())
def test_the_compiled_prepare_takes_the_decisions_of_its_twin(message):
    """What the compiled prepare (prepare_plain, prepare_many) answers for a hostile message is what the
    Python twin answers: the same refusal, or the same record."""
    for topic in ("T", "U", "%RETRY%G"):
        checked_topic(topic)  # the compiled prepare only takes topics the store has checked once
    twin = _outcome(PREPARER.prepare_py, message)
    assert _outcome(PREPARER.prepare, message) == twin
    many = _outcome(lambda m: PREPARER.prepare_many([m])[0], message)
    assert many == twin


def test_deliver_delayed_refuses_a_time_that_is_not_an_int(tmp_path):
    with MessageStore.open(tmp_path, CONFIG) as store:
        store.put(Message("T", b"x", properties={"DELAY": "1"}))
        with pytest.raises(InvalidArgumentError, match="now_ms"):
            store.deliver_delayed("x")  # type: ignore[arg-type]
