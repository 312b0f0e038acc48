"""Message: what `Message(...)` keeps, through the compiled call, the Python `__new__` with the compiled
slot filler, and the Python `__new__` with its Python twin alike, and that it stays a frozen dataclass
(equality, hashing, replace, copy, pickle)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from rocketstore import Message
from rocketstore import message as message_module
from rocketstore.errors import InvalidMessageError, InvalidMessageTypeError, RocketStoreError
from rocketstore.native import speedups

WAYS = ["python", "compiled slots", "compiled call"]


@pytest.fixture(params=WAYS)
def new(request, monkeypatch) -> Callable[..., Message]:
    """How the test builds its messages: `Message(...)` itself (with the compiled module, the type's compiled
    call), or the Python `__new__` filling the slots with the compiled filler or with its Python twin."""
    if request.param != "python" and speedups is None:
        pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
    if request.param == "compiled call":
        return Message
    filler = speedups.fill_slots if request.param == "compiled slots" else message_module._new_with_slots_py
    monkeypatch.setattr(message_module, "_new_with_slots", filler)
    return lambda *args, **kwargs: Message.__new__(Message, *args, **kwargs)


def test_every_argument_is_kept_by_position_and_by_name(new):
    values: tuple[Any, ...] = ("T", b"body", 3, "TagA", ("k1", "k2"), {"A": "b"}, -1, 5, "10.0.0.1:9", 4, 2, 77)
    names = [f.name for f in dataclasses.fields(Message)]
    by_position = new(*values)
    by_name = new(**dict(zip(names, values, strict=True)))
    assert type(by_position) is Message and type(by_name) is Message
    assert [getattr(by_position, n) for n in names] == list(values)
    assert by_name == by_position and hash(new("T", b"x")) == hash(new("T", b"x"))
    assert new("T", b"x") == new("T", b"x", 0, None, (), None, 0, None, None, 0, 0, 0)


def test_bodies_and_keys_are_normalised_as_before(new):
    assert new("T", "héllo").body == "héllo".encode()
    assert new("T", bytearray(b"ab")).body == bytearray(b"ab")
    assert new("T", b"x", keys="one").keys == ("one",)
    assert new("T", b"x", keys=["a", "b"]).keys == ("a", "b")
    assert new("T", b"x", keys=iter(["a"])).keys == ("a",)
    with pytest.raises(InvalidMessageError, match="body must be bytes"):
        new("T", 5)
    with pytest.raises(InvalidMessageError, match="lone surrogate"):
        new("T", "\ud800")


def test_it_stays_a_frozen_dataclass(new):
    message = new("T", b"x", queue_id=2, keys=("k",), properties={"A": "b"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.topic = "U"
    assert dataclasses.replace(message, queue_id=3) == new("T", b"x", queue_id=3, keys=("k",),
                                                          properties={"A": "b"})
    assert copy.copy(message) == message and copy.deepcopy(message) == message
    assert pickle.loads(pickle.dumps(message)) == message
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'body'"):
        new("T")
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'topic'"):
        new(body=b"x")
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        new("T", b"x", colour="red")
    with pytest.raises(TypeError, match="multiple values for argument 'queue_id'"):
        new("T", b"x", 1, queue_id=2)
    with pytest.raises(TypeError, match="positional arguments but 14 were given"):
        new(*range(13))


def test_the_compiled_call_builds_what_the_python_new_builds():
    """Every mix of positional and named arguments, given or left out, with bodies and keys of each kind."""
    if speedups is None:
        pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
    names = [f.name for f in dataclasses.fields(Message)]
    values: list[Any] = ["T", b"body", 3, "TagA", ("k1",), {"A": "b"}, -1, 5, "10.0.0.1:9", 4, 2, 77]
    bodies: list[Any] = [b"b", "str", bytearray(b"ba"), memoryview(b"mv")]
    keys: list[Any] = [("a", "b"), "one", ["l"], ()]
    for mask in range(1 << len(names)):
        chosen = [n for i, n in enumerate(names) if mask >> i & 1]
        if chosen[:2] != ["topic", "body"]:
            continue  # topic and body are required: the TypeError cases are above
        body, key = bodies[mask % len(bodies)], keys[(mask // 7) % len(keys)]
        given = {n: body if n == "body" else key if n == "keys" else values[names.index(n)] for n in chosen}
        for positional in range(len(chosen) + 1):
            if chosen[:positional] != names[:positional]:
                break  # positional arguments come first, without gaps
            args = [given[n] for n in chosen[:positional]]
            kwargs = {n: given[n] for n in chosen[positional:]}
            compiled = Message(*args, **kwargs)
            python = Message.__new__(Message, *args, **kwargs)
            assert type(compiled) is Message
            assert [getattr(compiled, n) for n in names] == [getattr(python, n) for n in names], (args, kwargs)


def test_a_subclass_is_built_by_its_own_new():
    class Tagged(Message):
        __slots__ = ()

    message = Tagged("T", b"x", keys=("k",))
    assert type(message) is Tagged and message == Tagged("T", b"x", keys=("k",)) and message.keys == ("k",)


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


def test_keys_it_cannot_take_are_refused_with_an_error_that_is_also_a_type_error(new):
    """Keys that are not iterable: InvalidMessageTypeError, a RocketStoreError and the TypeError Python raised
    for them before; keys that are not strs are refused when the message is put (tests/adversarial)."""
    for keys in (5, None, 1.5):
        with pytest.raises(InvalidMessageTypeError, match=f"not {type(keys).__name__}") as caught:
            new("T", b"x", keys=keys)
        assert isinstance(caught.value, TypeError) and isinstance(caught.value, RocketStoreError)
    assert new("T", b"x", keys=(1, 2)).keys == (1, 2)
