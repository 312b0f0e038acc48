"""`rocketstore admin`: the mqadmin commands operators use, over the network against a running broker
(`rocketstore serve` or RocketMQ's own), without Java.

Commands live by subject in `admin_topics`, `admin_groups`, `admin_cluster` and `admin_messages`; their
shared options in `admin_common`; the requests in `rocketstore.protocol.admin_client`.
"""

from __future__ import annotations

import click

from rocketstore.cli import admin_cluster, admin_groups, admin_messages, admin_topics


@click.group("admin", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
def admin() -> None:
    """Administer a running broker over the network, as RocketMQ's mqadmin does.

    Give the name server with -n/--namesrv (or $NAMESRV_ADDR); commands that take -b/--broker go to that
    broker only. A broker that refuses a request or cannot be reached ends the command with one line on
    stderr and exit code 1.
    """


for _module in (admin_topics, admin_groups, admin_cluster, admin_messages):
    for _command in _module.COMMANDS:
        admin.add_command(_command)
