"""Message: what `Message(...)` keeps, through the compiled slot filler and its Python twin alike, and
that it stays a frozen dataclass (equality, hashing, replace, copy, pickle)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from rocketstore import Message
from rocketstore import message as message_module
from rocketstore.errors import InvalidMessageError
from rocketstore.native import speedups

FILLERS = ["python", "compiled"]


@pytest.fixture(params=FILLERS)
def filler(request, monkeypatch):
    if request.param == "compiled":
        if speedups is None:
            pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
        monkeypatch.setattr(message_module, "_new_with_slots", speedups.fill_slots)
    else:
        monkeypatch.setattr(message_module, "_new_with_slots", message_module._new_with_slots_py)
    return request.param


def test_every_argument_is_kept_by_position_and_by_name(filler):
    values: tuple[Any, ...] = ("T", b"body", 3, "TagA", ("k1", "k2"), {"A": "b"}, -1, 5, "10.0.0.1:9", 4, 2, 77)
    names = [f.name for f in dataclasses.fields(Message)]
    by_position = Message(*values)
    by_name = Message(**dict(zip(names, values, strict=True)))
    assert [getattr(by_position, n) for n in names] == list(values)
    assert by_name == by_position and hash(Message("T", b"x")) == hash(Message("T", b"x"))
    assert Message("T", b"x") == Message("T", b"x", 0, None, (), None, 0, None, None, 0, 0, 0)


def test_bodies_and_keys_are_normalised_as_before(filler):
    assert Message("T", "héllo").body == "héllo".encode()
    assert Message("T", bytearray(b"ab")).body == bytearray(b"ab")
    assert Message("T", b"x", keys="one").keys == ("one",)
    assert Message("T", b"x", keys=["a", "b"]).keys == ("a", "b")
    assert Message("T", b"x", keys=iter(["a"])).keys == ("a",)
    with pytest.raises(InvalidMessageError, match="body must be bytes"):
        Message("T", 5)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="lone surrogate"):
        Message("T", "\ud800")


def test_it_stays_a_frozen_dataclass(filler):
    message = Message("T", b"x", queue_id=2, keys=("k",), properties={"A": "b"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.topic = "U"  # type: ignore[misc]
    assert dataclasses.replace(message, queue_id=3) == Message("T", b"x", queue_id=3, keys=("k",),
                                                              properties={"A": "b"})
    assert copy.copy(message) == message and copy.deepcopy(message) == message
    assert pickle.loads(pickle.dumps(message)) == message
    with pytest.raises(TypeError):
        Message("T")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Message("T", b"x", colour="red")  # type: ignore[call-arg]


def test_the_constructor_takes_the_fields_in_order_with_their_declared_defaults():
    """`Message.__new__` spells the fields out for speed; the dataclass fields stay the declaration."""
    import inspect

    parameters = list(inspect.signature(Message.__new__).parameters.values())[1:]  # after cls
    fields = dataclasses.fields(Message)
    assert [p.name for p in parameters] == [f.name for f in fields]
    for parameter, field in zip(parameters, fields, strict=True):
        declared = inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
        assert parameter.default == declared, field.name
        assert parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
