"""What every `rocketstore admin` command shares: the connection options (`-n/--namesrv`, ACL keys,
`--timeout`), the output flags (`--json`, `--debug`), and the choice of brokers a command goes to.

A command decorated with `admin_command` receives an open `AdminClient` as its first argument; the
connections close when it returns. Request failures (`RequestFailedError`, `BrokerUnreachableError`)
are left to `run_guarded`, which prints them as one line and exits 1.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from rocketstore.cli._errors import UsageProblem
from rocketstore.cli._state import CliState
from rocketstore.protocol.admin_client import AdminClient

F = TypeVar("F", bound=Callable[..., Any])

NAMESRV_ENV = "NAMESRV_ADDR"  # mqadmin's variable for the name server
DEFAULT_TIMEOUT_S = 5.0
_CONNECTION_PARAMS = ("namesrv", "access_key", "secret_key", "timeout")


def _set_state(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value:
            setattr(ctx.ensure_object(CliState), name, value)

    return callback


def admin_command(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the connection and output options to a command function taking an `AdminClient` first."""

    @functools.wraps(func)
    def run(**kwargs: Any) -> Any:
        namesrv, access_key, secret_key, timeout = (kwargs.pop(name) for name in _CONNECTION_PARAMS)
        if (access_key is None) != (secret_key is None):
            raise UsageProblem("--access-key and --secret-key go together")
        credentials = (access_key, secret_key) if access_key is not None else None
        with AdminClient(namesrv, timeout, credentials) as admin:
            return func(admin, **kwargs)

    options = [
        click.option("-n", "--namesrv", envvar=NAMESRV_ENV, metavar="HOST:PORT[;HOST:PORT]",
                     help=f"Name server address (default: ${NAMESRV_ENV})."),
        click.option("--access-key", metavar="KEY", help="ACL access key: every request is signed."),
        click.option("--secret-key", metavar="KEY", help="ACL secret key (with --access-key)."),
        click.option("--timeout", type=click.FloatRange(min=0.1), default=DEFAULT_TIMEOUT_S, show_default=True,
                     help="Seconds to wait for a connection and for each answer."),
        click.option("--json", "json_output", is_flag=True, expose_value=False, callback=_set_state("json_output"),
                     help="Print JSON Lines (stable snake_case field names) instead of tables."),
        click.option("--debug", is_flag=True, expose_value=False, callback=_set_state("debug"),
                     help="Show the traceback of an error."),
    ]
    wrapped: Callable[..., Any] = run
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped


def need_namesrv(admin: AdminClient, what: str) -> None:
    """Refuse a command that needs the name server when none was given.

    Raises:
        UsageProblem: no -n/--namesrv (nor $NAMESRV_ADDR).
    """
    if not admin.namesrv:
        raise UsageProblem(f"{what} needs the name server: give -n/--namesrv HOST:PORT (or set ${NAMESRV_ENV})")


def target_brokers(admin: AdminClient, broker: str | None, cluster: str | None) -> list[tuple[str, str]]:
    """(broker name, address) of the brokers a command goes to: the one `-b` names, else the masters of
    `-c`'s cluster, else every master the name server knows. The name of a `-b` broker comes from the
    name server when one is given ("" otherwise).

    Raises:
        UsageProblem: neither -b nor a name server.
        RequestFailedError: no such cluster.
    """
    if broker is not None:
        if not admin.namesrv:
            return [("", broker)]
        names = {addr: name for name, addr in admin.cluster_info().masters()}
        return [(names.get(broker, ""), broker)]
    need_namesrv(admin, "without -b/--broker, this command")
    masters = admin.cluster_info().masters(cluster)
    if not masters:
        raise UsageProblem("the name server knows no broker" + (f" in cluster {cluster}" if cluster else ""))
    return masters


broker_addr_option = click.option("-b", "--broker", metavar="HOST:PORT", help="Broker address (default: every "
                                  "master broker of the cluster the name server knows).")
cluster_option = click.option("-c", "--cluster", metavar="NAME", help="Cluster name: its master brokers.")
topic_option = click.option("-t", "--topic", required=True, help="Topic name.")
group_option = click.option("-g", "--group", required=True, help="Consumer group name.")
