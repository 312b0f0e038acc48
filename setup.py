"""The optional compiled helpers (rocketstore._speedups); everything else is in pyproject.toml.

`optional=True`: where no C compiler or Python headers are found the install goes on without the
module and rocketstore runs its pure-Python twins of the same functions.

The module is built from the C files of `src/rocketstore/_c/`, one per layer it serves (`format.c`,
`storage.c`, `log.c`, `services.c`, `store.c`) and `module.c`, which puts them together; `common.h` is what
they share.
Before compiling, `src/rocketstore/_c/_layout.h` is generated from the Python declarations
(`rocketstore/store/c_layout.py`, run with the standard library only), so the C code never repeats a
layout or a field order.
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SRC = Path(__file__).resolve().parent / "src"
C_DIR = "src/rocketstore/_c"
LAYOUT_HEADER = SRC / "rocketstore" / "_c" / "_layout.h"
C_SOURCES = [f"{C_DIR}/{name}.c" for name in ("module", "format", "columns", "storage", "log", "queue", "services",
                                                 "store", "prepare", "append", "appender", "_crc32")]
C_HEADERS = [f"{C_DIR}/{name}.h" for name in ("common", "store", "_crc32", "_layout")]


def write_layout_header() -> None:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from rocketstore.store.c_layout import header; "
            "open(sys.argv[2], 'w', encoding='utf-8').write(header())")
    env = dict(os.environ, ROCKETSTORE_PURE_PYTHON="1")  # not the compiled module being rebuilt (it may be stale)
    subprocess.run([sys.executable, "-S", "-c", code, str(SRC), str(LAYOUT_HEADER)], check=True, env=env)


class BuildWithLayout(build_ext):
    def run(self) -> None:
        write_layout_header()
        super().run()


setup(cmdclass={"build_ext": BuildWithLayout},
      ext_modules=[Extension("rocketstore._speedups", C_SOURCES, depends=C_HEADERS, optional=True)])
