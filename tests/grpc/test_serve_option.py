"""`serve --grpc`: bad addresses are refused before the store is opened."""

from __future__ import annotations

from click.testing import CliRunner

from rocketstore.cli.serve import serve


def test_bad_grpc_addresses_are_refused_before_the_store_is_opened(tmp_path):
    store = tmp_path / "store"
    bad = CliRunner().invoke(serve, [str(store), "--grpc", "nowhere"])
    assert bad.exit_code == 2 and "--grpc" in bad.output
    assert not store.exists()
