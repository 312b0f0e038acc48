"""`serve --grpc`: refused beside --acl (the endpoint does not check ACL yet), and bad addresses."""

from __future__ import annotations

from click.testing import CliRunner

from rocketstore.broker.command import serve


def test_grpc_beside_acl_and_bad_addresses_are_refused_before_the_store_is_opened(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts: []\n")
    store = tmp_path / "store"
    refused = CliRunner().invoke(serve, [str(store), "--acl", str(acl), "--grpc", "127.0.0.1:18081"])
    assert refused.exit_code == 2 and "does not check --acl" in refused.output
    bad = CliRunner().invoke(serve, [str(store), "--grpc", "nowhere"])
    assert bad.exit_code == 2 and "--grpc" in bad.output
    assert not store.exists()
