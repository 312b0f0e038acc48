"""Receipt handles as AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue parse them:
any string either names a queue id and offset of bounded ASCII digits, or is INVALID_RECEIPT_HANDLE for
its entry, never another error."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore
from rocketstore.broker.grpc.consumer_state import ConsumerStateTable
from rocketstore.broker.grpc.convert import GrpcStatusError
from rocketstore.broker.grpc.pop import JAVA_INT_MAX, JAVA_LONG_MAX, Handle, PopService
from rocketstore.broker.grpc.protos import pb
from tests.broker.broker_support import create_store

SUPERSCRIPT_TWO = "rs1.\u00b2.0.abc"
LONG_DIGITS = "rs1." + "9" * 5000 + ".0.abc"

# pieces a handle is made of, and the ones that look like them: digits of other scripts, signs, spaces,
# underscores (int() takes "1_0"), huge runs of digits, hex of either case
_digits = st.one_of(st.text("0123456789", min_size=1, max_size=25), st.integers(0, 2**70).map(str),
                    st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=4),
                    st.sampled_from(["-1", "+1", " 1", "1_0", "0x1", "\u0661", "\uff11", "9" * 5000]))
_token = st.one_of(st.text("0123456789abcdef", min_size=16, max_size=16), st.text(max_size=20),
                   st.text("0123456789ABCDEF", min_size=16, max_size=16))
_near = st.builds(lambda a, b, c, sep: sep.join(["rs1", a, b, c]), _digits, _digits, _token,
                  st.sampled_from([".", ".", "\u3002", ","]))
_handles = st.one_of(st.text(), st.binary().map(lambda raw: raw.decode("utf-8", "replace")),
                     st.binary().map(lambda raw: raw.decode("latin-1")), _near)


@given(_handles)
@example(SUPERSCRIPT_TWO)
@example(LONG_DIGITS)
@example("rs1.1.2.0123456789abcdef\n")
@settings(max_examples=600, deadline=None)
def test_any_string_parses_into_bounded_ints_or_is_an_invalid_receipt_handle(text: str) -> None:
    try:
        handle = Handle.parse(text)
    except GrpcStatusError as exc:
        assert exc.code == pb.Code.INVALID_RECEIPT_HANDLE
        return
    assert 0 <= handle.queue_id <= JAVA_INT_MAX and 0 <= handle.queue_offset <= JAVA_LONG_MAX
    assert handle.encode() == text  # only what this broker writes parses


@pytest.fixture(scope="module")
def in_flight() -> Iterator[tuple[PopService, str]]:
    """A PopService over a store with one message in flight for group G, and its receipt handle."""
    with tempfile.TemporaryDirectory() as tmp, MessageStore.open(create_store(Path(tmp) / "s")) as store:
        store.put(Message("T", b"one"))
        service = PopService(store, ConsumerStateTable(store.path), 3, on_put=lambda t, q: None,
                             ensure_dlq=lambda t: None)
        (delivery,) = service.receive("G", "T", [0], None, 1, 60_000, now_ms=1_000)
        yield service, delivery.receipt_handle


@given(_handles)
@example(SUPERSCRIPT_TWO)
@example(LONG_DIGITS)
@settings(max_examples=300, deadline=None)
def test_the_three_rpcs_refuse_any_other_handle_with_invalid_receipt_handle(in_flight: tuple[PopService, str],
                                                                            text: str) -> None:
    pop, current = in_flight
    if text == current:
        return
    calls = (lambda: pop.ack("G", "T", text, 2_000),
             lambda: pop.change_invisible("G", "T", text, 10_000, 2_000),
             lambda: pop.forward_to_dlq("G", "T", text, 2_000))
    for rpc in calls:
        with pytest.raises(GrpcStatusError) as raised:
            rpc()
        assert raised.value.code == pb.Code.INVALID_RECEIPT_HANDLE


def test_the_current_handle_still_works_after_the_bad_ones(in_flight: tuple[PopService, str]) -> None:
    pop, current = in_flight
    pop.ack("G", "T", current, 2_000)
    with pytest.raises(GrpcStatusError):
        pop.ack("G", "T", current, 2_000)  # done: its handle is void
