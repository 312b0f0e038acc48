"""The optional compiled helpers (rocketstore._speedups); everything else is in pyproject.toml.

`optional=True`: where no C compiler or Python headers are found the install goes on without the
module and rocketstore runs its pure-Python twins of the same functions.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("rocketstore._speedups", ["src/rocketstore/_speedups.c", "src/rocketstore/_crc32.c"],
                             depends=["src/rocketstore/_crc32.h"], optional=True)])
