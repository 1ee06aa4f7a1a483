"""KV's C constructor (samzapy/_speedups.c), the one part of samzapy built here; the rest of
the project's metadata is in pyproject.toml. The extension is optional: an install without a C
compiler succeeds, with KV as the plain NamedTuple (the same behaviour, a slower constructor).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("samzapy._speedups", ["samzapy/_speedups.c"], optional=True)])
