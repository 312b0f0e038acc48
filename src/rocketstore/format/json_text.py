"""RocketMQ's JSON dialect: fastjson (and the C++ client's JsonCpp) write integer map keys unquoted
(`{0:250,1:251}`), which strict JSON parsers refuse. Pure text in, text out.
"""

from __future__ import annotations


def quote_integer_keys(text: str) -> str:
    """Quote bare integer object keys (`{0:250}` -> `{"0":250}`), leaving strings untouched."""
    out: list[str] = []
    i, n = 0, len(text)
    expect_key = False
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            expect_key = False
            continue
        if c in "{,":
            expect_key = True
        elif expect_key and (c.isdigit() or c == "-"):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == ":":
                out.append(f'"{text[i:j]}"')
                i = j
                expect_key = False
                continue
        elif not c.isspace():
            expect_key = False
        out.append(c)
        i += 1
    return "".join(out)
