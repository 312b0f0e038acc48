"""The walk that quotes RocketMQ's bare integer keys gives the one-character-at-a-time rule's text on any
text (strings with escapes, unterminated ones, keys with signs and spaces, digits of other scripts), and
what fastjson's layout writes reads back as the data written."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.format.json_text import quote_integer_keys, quote_integer_keys_py
from rocketstore.log.json_config import dumps_fastjson, loads_lenient

JSONISH = st.text(st.sampled_from(list('{}[],:"\\ -0123456789ab\t\n\r') + ["\u0663", "\u00b2", "\u2003", "\u00e9"]),
                  max_size=80)


@settings(deadline=None, max_examples=2000)
@given(JSONISH)
def test_the_walk_gives_the_rules_text_on_any_text(text):
    assert quote_integer_keys(text) == quote_integer_keys_py(text)


values = st.recursive(
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8), st.booleans()),
    lambda inner: st.dictionaries(st.one_of(st.text(max_size=6), st.integers(-5, 2**31).map(int)), inner, max_size=4),
    max_leaves=12)


@settings(deadline=None, max_examples=300)
@given(st.dictionaries(st.text(max_size=6), values, max_size=4))
def test_what_fastjson_layout_writes_reads_back(data):
    def with_str_keys(value):
        if isinstance(value, dict):
            return {str(k): with_str_keys(v) for k, v in value.items()}
        return value

    text = dumps_fastjson(data)
    assert loads_lenient(text) == with_str_keys(data)
    assert quote_integer_keys(text) == quote_integer_keys_py(text)


def test_a_broker_sized_offset_table_reads_back():
    table = {f"Topic{t}@Group{g}": {q: t * 1000 + q for q in range(16)} for t in range(200) for g in range(10)}
    text = dumps_fastjson({"offsetTable": table})
    assert len(text) > 300_000
    assert loads_lenient(text)["offsetTable"]["Topic7@Group3"]["15"] == 7015
    assert quote_integer_keys(text) == quote_integer_keys_py(text)
