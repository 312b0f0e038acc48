"""`rocketstore serve`: the click command that runs a broker (and its name server) over a store."""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.retention import delete_hours
from rocketstore.broker.server import ConnectionLimits
from rocketstore.broker.topics import TopicSpec
from rocketstore.broker.transactions import TransactionSettings
from rocketstore.cli._state import store_options
from rocketstore.errors import RocketStoreError
from rocketstore.protocol.address import split_address


def _address(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        split_address(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


def _optional_address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None or value.lower() in ("", "none", "off"):
        return None
    return _address(ctx, param, value)


def _topics(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[TopicSpec, ...]:
    """--topic NAME[:QUEUES[:TYPE]], repeatable: the specs, one per name.

    Raises:
        click.BadParameter: a spec that does not parse, or two different specs of one topic.
    """
    specs: dict[str, TopicSpec] = {}
    for text in value:
        try:
            spec = TopicSpec.parse(text, BrokerConfig.default_queue_nums)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from exc
        if specs.get(spec.name, spec) != spec:
            raise click.BadParameter(f"topic {spec.name!r} is declared twice: {specs[spec.name]} and {spec}")
        specs[spec.name] = spec
    return tuple(specs.values())


DEFAULT_GRPC = "127.0.0.1:8081"  # RocketMQ 5 proxy's grpcServerPort


def _retention(file_reserved_time: int | None, delete_when: str | None, disk_max_used_space_ratio: int | None,
               clean_forcibly_ratio: float | None, warning_level_ratio: float | None) -> dict[str, Any]:
    """The StoreConfig fields the retention flags set (RocketMQ's names and units: hours, "HH;HH", a
    percentage for diskMaxUsedSpaceRatio, ratios for the two disk levels).

    Raises:
        click.BadParameter: a --delete-when that is not hours 00..23 joined by ';'.
    """
    given: dict[str, Any] = {}
    if file_reserved_time is not None:
        given["file_reserved_hours"] = file_reserved_time
    if delete_when is not None:
        try:
            delete_hours(delete_when)
        except ValueError as exc:
            raise click.BadParameter(f"{delete_when!r} is not hours 00..23 joined by ';' ({exc})",
                                     param_hint="--delete-when") from exc
        given["delete_when"] = delete_when
    if disk_max_used_space_ratio is not None:
        given["disk_max_used_ratio"] = disk_max_used_space_ratio / 100
    if clean_forcibly_ratio is not None:
        given["disk_clean_forcibly_ratio"] = clean_forcibly_ratio
    if warning_level_ratio is not None:
        given["disk_full_ratio"] = warning_level_ratio
    return given


def _grpc_address(value: str | None) -> str | None:
    """--grpc: None (not given) means the default; 'off' means none. With --acl every gRPC call must be
    signed by one of its accounts as well (grpc/auth.py).

    Raises:
        click.BadParameter: not host:port, or grpcio / grpcio-tools missing.
    """
    if value is not None and value.lower() in ("", "none", "off"):
        return None
    if value is None:
        value = DEFAULT_GRPC
    try:
        split_address(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--grpc") from exc
    try:
        import grpc  # noqa: F401
        import grpc_tools  # noqa: F401
    except ImportError as exc:
        raise click.BadParameter(f"the gRPC endpoint needs grpcio and grpcio-tools ({exc}); install "
                                 "rocketstore's dependencies or pass --grpc off", param_hint="--grpc") from exc
    return value


def _grpc_tls(grpc_address: str | None, cert: Path | None, key: Path | None) -> None:
    """--grpc-tls-cert and --grpc-tls-key: both or neither; checked to be a PEM pair, then given to the
    gRPC endpoint (without them it makes a self-signed certificate at start).

    Raises:
        click.BadParameter: one without the other, or files that are not a certificate and its key.
    """
    if (cert is None) != (key is None):
        raise click.BadParameter("give both --grpc-tls-cert and --grpc-tls-key, or neither",
                                 param_hint="--grpc-tls-cert/--grpc-tls-key")
    if grpc_address is None or cert is None or key is None:
        return
    from rocketstore.broker.grpc.service import GrpcEndpoint
    from rocketstore.broker.grpc.tls import load_pair

    try:
        load_pair(cert, key)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--grpc-tls-cert/--grpc-tls-key") from exc
    GrpcEndpoint.TLS_FILES = (cert, key)


@click.command("serve")
@click.argument("store", type=click.Path(file_okay=False, path_type=Path))
@click.option("--namesrv", default="127.0.0.1:9876", show_default=True, callback=_optional_address,
              help="Address of the name server this process serves ('off' for none). "
                   "When equal to --listen, one port serves both roles.")
@click.option("--listen", default="127.0.0.1:10911", show_default=True, callback=_address,
              help="Address the broker listens on.")
@click.option("--broker-name", default="broker-a", show_default=True, help="Broker name announced in routes.")
@click.option("--cluster", default="DefaultCluster", show_default=True, help="Cluster name.")
@click.option("--acl", "acl_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="plain_acl.yml: require signed requests from these accounts.")
@click.option("--max-frame-size", default=16 * 1024 * 1024, show_default=True, type=click.IntRange(1024),
              help="Largest accepted request frame, in bytes.")
@click.option("--max-connections", default=ConnectionLimits.max_connections, show_default=True,
              type=click.IntRange(1), help="Open connections; one more is closed at once.")
@click.option("--max-in-flight", default=ConnectionLimits.max_in_flight, show_default=True, type=click.IntRange(1),
              help="Requests of one connection handled or held at once; more are not read until one ends.")
@click.option("--max-unsent-bytes", default=ConnectionLimits.max_unsent_bytes, show_default=True,
              type=click.IntRange(1024), help="Answers queued for a client that does not read them before "
                                              "its requests stop being read.")
@click.option("--max-buffered-bytes", default=ConnectionLimits.max_buffered_bytes, show_default=True,
              type=click.IntRange(1024), help="Bytes of unfinished requests across all connections; the "
                                              "connection that passes it is closed.")
@click.option("--idle-timeout", default=ConnectionLimits.idle_timeout_s, show_default=True,
              type=click.FloatRange(0.1), help="Seconds a connection may stay idle (or leave answers unread).")
@click.option("--frame-timeout", default=ConnectionLimits.frame_timeout_s, show_default=True,
              type=click.FloatRange(0.1), help="Seconds a client may take to finish a request it started.")
@click.option("--delay-levels", default=None,
              help='Delay of each level for delayed and retried messages, e.g. "1s 5s 10s" '
                   "(default: the store's, RocketMQ's 18 levels).")
@click.option("--max-reconsume-times", default=16, show_default=True, type=click.IntRange(0),
              help="Deliveries of a failing message before it goes to %DLQ%<group>.")
@click.option("--transaction-timeout", default=TransactionSettings.timeout_ms / 1000, show_default=True,
              type=click.FloatRange(0.1), help="Seconds a transaction may stay open before its producer is asked "
                                               "whether to commit it.")
@click.option("--transaction-check-interval", default=TransactionSettings.check_interval_ms / 1000,
              show_default=True, type=click.FloatRange(0.1), help="Seconds between two checks of one open "
                                                                  "transaction.")
@click.option("--transaction-check-max", default=TransactionSettings.check_max, show_default=True,
              type=click.IntRange(1), help="Checks of an open transaction before it is rolled back and kept in "
                                           "TRANS_CHECK_MAX_TIME_TOPIC.")
@click.option("--flush", "flush_mode", type=click.Choice(["async", "sync"]), default="async", show_default=True,
              help="sync: a send is acknowledged after its bytes are on disk (SYNC_FLUSH).")
@click.option("--grpc", "grpc_address", default=None, metavar="HOST:PORT|off",
              help="Address of the gRPC endpoint for RocketMQ 5 clients (apache.rocketmq.v2.MessagingService); "
                   "'off' for none. Default 127.0.0.1:8081; with --acl its calls must be signed too. Plaintext "
                   "and TLS are both served on it.")
@click.option("--grpc-tls-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="PEM certificate (chain) for TLS clients of --grpc, with --grpc-tls-key; "
                                   "default: a self-signed certificate made at start.")
@click.option("--grpc-tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="PEM private key of --grpc-tls-cert.")
@click.option("--topic", "topics", multiple=True, callback=_topics, metavar="NAME[:QUEUES[:TYPE]]",
              help="Create (or update) this topic at start, before clients connect; repeatable. QUEUES "
                   f"defaults to {BrokerConfig.default_queue_nums}; TYPE is RocketMQ 5's message.type attribute: "
                   "NORMAL, FIFO, DELAY or TRANSACTION (without it the topic takes every type).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@click.option("--read-only", is_flag=True,
              help="Open the store read-only: consumers, queries and admin reads are served, sends and every "
                   "other write are refused, consumer offsets are kept in memory; nothing on disk is written or "
                   "deleted (no retention). For a copied or restored store.")
@click.option("--file-reserved-time", type=click.IntRange(0), default=None, metavar="HOURS",
              help="RocketMQ's fileReservedTime: commitlog files whose newest message is older are deleted "
                   "(default: --config's, else 72).")
@click.option("--delete-when", default=None, metavar="HH[;HH...]",
              help="RocketMQ's deleteWhen: local hours at which expired files are deleted (default: --config's, "
                   "else 04).")
@click.option("--disk-max-used-space-ratio", type=click.IntRange(10, 95), default=None, metavar="PERCENT",
              help="RocketMQ's diskMaxUsedSpaceRatio: above this disk use expired files are deleted at any hour "
                   "(default: --config's, else 75).")
@click.option("--disk-space-clean-forcibly-ratio", type=click.FloatRange(0, 1, min_open=True), default=None,
              metavar="RATIO", help="RocketMQ's diskSpaceCleanForciblyRatio: above this disk use every commitlog "
                                    "file but the newest is deleted, whatever its age (default 0.85).")
@click.option("--disk-space-warning-level-ratio", type=click.FloatRange(0, 1, min_open=True), default=None,
              metavar="RATIO", help="RocketMQ's diskSpaceWarningLevelRatio: above this disk use sends are refused "
                                    "(default 0.90).")
@store_options
def serve(store: Path, namesrv: str | None, listen: str, broker_name: str, cluster: str,
          acl_file: Path | None, max_frame_size: int, max_connections: int, max_in_flight: int,
          max_unsent_bytes: int, max_buffered_bytes: int, idle_timeout: float, frame_timeout: float,
          delay_levels: str | None, max_reconsume_times: int, transaction_timeout: float,
          transaction_check_interval: float, transaction_check_max: int, flush_mode: str,
          grpc_address: str | None, grpc_tls_cert: Path | None, grpc_tls_key: Path | None,
          topics: tuple[TopicSpec, ...], log_level: str, read_only: bool,
          file_reserved_time: int | None, delete_when: str | None, disk_max_used_space_ratio: int | None,
          disk_space_clean_forcibly_ratio: float | None, disk_space_warning_level_ratio: float | None) -> None:
    """Serve the store at STORE to RocketMQ clients (Broker and NameServer roles). Stops on SIGTERM."""
    from rocketstore import FlushMode, MessageStore, StoreConfig
    from rocketstore.broker.acl import AclConfigError
    from rocketstore.broker.app import BrokerApp
    from rocketstore.cli._errors import UsageProblem
    from rocketstore.cli._geometry import geometry_for
    from rocketstore.cli._state import check_store_dir

    retention = _retention(file_reserved_time, delete_when, disk_max_used_space_ratio,
                           disk_space_clean_forcibly_ratio, disk_space_warning_level_ratio)
    if read_only and click.get_current_context().params.get("topics"):
        raise click.UsageError("--topic creates topics in the store: it cannot be given with --read-only")
    try:
        if read_only:
            check_store_dir(store)
        store_config = geometry_for(store, read_only=read_only)  # refuses a geometry the files contradict
        if retention:
            store_config = replace(store_config or MessageStore.config_of(store), **retention)
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from exc
    except RocketStoreError as exc:
        raise click.ClickException(str(exc)) from exc

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = BrokerConfig(store_path=store, listen=listen, namesrv=namesrv,
                          broker_name=broker_name, cluster=cluster, acl_file=acl_file,
                          max_frame_size_bytes=max_frame_size, max_reconsume_times=max_reconsume_times,
                          limits=ConnectionLimits(max_connections, max_in_flight, max_unsent_bytes, max_buffered_bytes,
                                                  idle_timeout, frame_timeout),
                          store_config=store_config,
                          transactions=TransactionSettings(int(transaction_timeout * 1000),
                                                           int(transaction_check_interval * 1000),
                                                           transaction_check_max),
                          topics=topics)
    if delay_levels is not None:
        try:
            StoreConfig(delay_levels=delay_levels).delay_level_millis()
        except (ValueError, KeyError, IndexError) as exc:
            raise click.BadParameter(f"{delay_levels!r} is not like '1s 5s 10s'", param_hint="--delay-levels") from exc
    grpc_address = _grpc_address(grpc_address)
    _grpc_tls(grpc_address, grpc_tls_cert, grpc_tls_key)
    try:
        mode = FlushMode.SYNC if flush_mode == "sync" else FlushMode.ASYNC
        asyncio.run(BrokerApp(config, delay_levels, mode, grpc_address, read_only=read_only).serve_forever())
    except (RocketStoreError, AclConfigError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
