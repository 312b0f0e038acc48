"""`rocketstore admin` cluster commands: cluster-list and broker-status (mqadmin's clusterList and
brokerStatus), both read from each broker's runtime counters (GET_BROKER_RUNTIME_INFO)."""

from __future__ import annotations

from typing import Any

import click

from rocketstore.cli._output import Column, number, show, show_fields
from rocketstore.cli.admin_common import admin_command, broker_addr_option, need_namesrv, target_brokers
from rocketstore.protocol.admin_client import AdminClient


def _first(value: str | None) -> float | None:
    """The first figure of a "10 s, 1 min, 10 min" TPS triple ("12.50 3.00 0.30")."""
    try:
        return float((value or "").split()[0])
    except (IndexError, ValueError):
        return None


def _today(table: dict[str, str], prefix: str) -> int | None:
    try:
        return int(table[f"{prefix}TodayNow"]) - int(table[f"{prefix}TodayMorning"])
    except (KeyError, ValueError):
        return None


def _tps(value: Any) -> str:
    return "" if value is None else f"{value:.2f}"


CLUSTER_COLUMNS = (
    Column("cluster", "cluster"), Column("broker", "broker_name"), Column("id", "broker_id", number, "right"),
    Column("address", "addr"), Column("version", "version"), Column("in TPS", "put_tps", _tps, "right"),
    Column("out TPS", "get_tps", _tps, "right"), Column("put today", "put_today", number, "right"),
    Column("got today", "get_today", number, "right"), Column("disk used", "disk_ratio", number, "right"),
)


@click.command("cluster-list")
@admin_command
def cluster_list(admin: AdminClient) -> None:
    """Every broker of every cluster, with its version and traffic (mqadmin clusterList)."""
    need_namesrv(admin, "cluster-list")
    info = admin.cluster_info()
    records = []
    for cluster, names in sorted(info.clusters.items()):
        for broker in (b for b in info.brokers if b.name in names):
            for broker_id, addr in broker.addrs.items():
                table = admin.runtime_info(addr)
                records.append({"cluster": cluster, "broker_name": broker.name, "broker_id": int(broker_id),
                                "addr": addr, "version": table.get("brokerVersionDesc"),
                                "put_tps": _first(table.get("putTps")),
                                "get_tps": _first(table.get("getTransferedTps")),
                                "put_today": _today(table, "msgPutTotal"), "get_today": _today(table, "msgGetTotal"),
                                "disk_ratio": table.get("commitLogDiskRatio")})
    show(records, records, CLUSTER_COLUMNS, lines=True, footer=f"{len(records)} broker(s)")


@click.command("broker-status")
@broker_addr_option
@admin_command
def broker_status(admin: AdminClient, broker: str | None) -> None:
    """A broker's runtime counters (mqadmin brokerStatus); every master's without -b."""
    if broker is not None:
        show_fields(dict(sorted(admin.runtime_info(broker).items())), title=f"broker {broker}")
        return
    records = [{"broker_name": name, "broker_addr": addr, "field": key, "value": value}
               for name, addr in target_brokers(admin, None, None)
               for key, value in sorted(admin.runtime_info(addr).items())]
    columns = (Column("broker", "broker_name"), Column("address", "broker_addr"), Column("field", "field"),
               Column("value", "value"))
    show(records, records, columns, lines=True)


COMMANDS = (cluster_list, broker_status)
