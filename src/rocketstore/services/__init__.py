"""Layer 4: behaviour over time (dispatch, flush, recovery, cleanup, scheduled delivery)."""
