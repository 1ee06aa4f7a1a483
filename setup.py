"""samzapy's C fast paths (samzapy/_speedups.c: KV's constructor, framed records and their
origins), the one part of samzapy built here; the rest of the project's metadata is in
pyproject.toml. The extension is optional: an install without a C compiler succeeds, with the
same code in Python (the same behaviour, slower).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("samzapy._speedups", ["samzapy/_speedups.c"], optional=True)])
