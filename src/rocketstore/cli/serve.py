"""`rocketstore serve`: the click command that runs a broker (and its name server) over a store."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import click

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.server import ConnectionLimits
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


DEFAULT_GRPC = "127.0.0.1:8081"  # RocketMQ 5 proxy's grpcServerPort


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
                   "'off' for none. Default 127.0.0.1:8081; with --acl its calls must be signed too.")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@store_options
def serve(store: Path, namesrv: str | None, listen: str, broker_name: str, cluster: str,
          acl_file: Path | None, max_frame_size: int, max_connections: int, max_in_flight: int,
          max_unsent_bytes: int, max_buffered_bytes: int, idle_timeout: float, frame_timeout: float,
          delay_levels: str | None, max_reconsume_times: int, transaction_timeout: float,
          transaction_check_interval: float, transaction_check_max: int, flush_mode: str,
          grpc_address: str | None, log_level: str) -> None:
    """Serve the store at STORE to RocketMQ clients (Broker and NameServer roles). Stops on SIGTERM."""
    from rocketstore import FlushMode, StoreConfig
    from rocketstore.broker.acl import AclConfigError
    from rocketstore.broker.app import BrokerApp
    from rocketstore.cli._errors import UsageProblem
    from rocketstore.cli._geometry import geometry_for

    try:
        store_config = geometry_for(store, read_only=False)  # refuses a geometry the files contradict
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from exc

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
                                                           transaction_check_max))
    if delay_levels is not None:
        try:
            StoreConfig(delay_levels=delay_levels).delay_level_millis()
        except (ValueError, KeyError, IndexError) as exc:
            raise click.BadParameter(f"{delay_levels!r} is not like '1s 5s 10s'", param_hint="--delay-levels") from exc
    grpc_address = _grpc_address(grpc_address)
    try:
        mode = FlushMode.SYNC if flush_mode == "sync" else FlushMode.ASYNC
        asyncio.run(BrokerApp(config, delay_levels, mode, grpc_address).serve_forever())
    except (RocketStoreError, AclConfigError, OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
