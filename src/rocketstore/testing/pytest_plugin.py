"""pytest plugin (entry point `pytest11`: rocketstore): the `rocketmq_broker` fixture.

One broker for the test session, started the first time a test asks for it, with the topics of the
`rocketmq_topics` ini option and of every `rocketmq_topics` marker on the session's tests:

    # pytest.ini                              # or in a test module
    [pytest]                                  pytestmark = pytest.mark.rocketmq_topics("orders:4:FIFO")
    rocketmq_topics = jobs payments:2
    rocketmq_broker_args = --delay-levels "1s 1s 1s"

    def test_send(rocketmq_broker):
        producer = Producer(ClientConfiguration(rocketmq_broker.grpc_endpoint, Credentials()), ("orders",))
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rocketstore.broker.topics import TopicSpec
from rocketstore.testing._broker import DEFAULT_QUEUE_NUMS, RunningBroker
from rocketstore.testing._broker import rocketmq_broker as start_broker

MARKER = "rocketmq_topics"
TOPICS_INI = "rocketmq_topics"
ARGS_INI = "rocketmq_broker_args"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(TOPICS_INI, type="args", default=[],
                  help="rocketmq_broker fixture: topics to create at start, NAME[:QUEUES[:TYPE]] "
                       "(TYPE: NORMAL, FIFO, DELAY or TRANSACTION)")
    parser.addini(ARGS_INI, type="args", default=[],
                  help="rocketmq_broker fixture: more `rocketstore serve` options")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(*specs): topics (NAME[:QUEUES[:TYPE]]) the session's "
                                       "rocketmq_broker fixture creates at start")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Refuse bad or conflicting topic specs before any test runs."""
    try:
        wanted_topics(config, items)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def wanted_topics(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """The topic specs of the ini option and of the items' markers, one per topic.

    Raises:
        ValueError: a spec that does not parse, or two different specs of one topic.
    """
    sources = [(text, f"the {TOPICS_INI} ini option") for text in config.getini(TOPICS_INI)]
    for item in items:
        for mark in item.iter_markers(MARKER):
            sources.extend((text, f"the {MARKER} marker of {item.nodeid}") for text in mark.args)
    specs: dict[str, tuple[TopicSpec, str]] = {}
    for text, where in sources:
        if not isinstance(text, str):
            raise ValueError(f"{where}: topic spec {text!r} is not a string like 'orders:4:FIFO'")
        try:
            spec = TopicSpec.parse(text, DEFAULT_QUEUE_NUMS)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc
        earlier = specs.setdefault(spec.name, (spec, where))
        if earlier[0] != spec:
            raise ValueError(f"topic {spec.name!r} is declared as {earlier[0]} by {earlier[1]} and as {spec} "
                             f"by {where}")
    return [str(spec) for spec, _ in specs.values()]


@pytest.fixture(scope="session")
def rocketmq_broker(request: pytest.FixtureRequest) -> Iterator[RunningBroker]:
    """A RocketMQ broker over a temporary store for the whole session: `namesrv_addr` for legacy
    clients, `grpc_endpoint` for RocketMQ 5 clients; stopped and removed at the end of the session."""
    topics = wanted_topics(request.config, request.session.items)
    with start_broker(topics, extra_args=request.config.getini(ARGS_INI)) as broker:
        yield broker
