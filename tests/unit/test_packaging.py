"""What `pip install samzapy` gets: the wheel built from this checkout holds the whole package,
its type information (``py.typed`` and the C extension's stub) and, where a C compiler is, the
extension itself; and nothing else (no tests, benches or scripts)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "samzapy"


def _setuptools_version() -> tuple[int, ...] | None:
    try:
        import setuptools
    except ImportError:
        return None
    return tuple(int(part) for part in setuptools.__version__.split(".")[:2] if part.isdigit())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    # Built offline, with this environment's setuptools (the dev extra's): an isolated build
    # would fetch it from PyPI.
    version = _setuptools_version()
    if version is None or version < (77,):
        pytest.skip(f"the wheel build needs setuptools >= 77 here, found {version}")
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")
    # From a copy: a build in place leaves build/ and samzapy.egg-info/ in the checkout.
    source = build / "source"
    shutil.copytree(
        PACKAGE, source / "samzapy", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    argv = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*argv, "--wheel-dir", str(out), str(source)],
        capture_output=True,
        text=True,
        check=False,
        env={"TMPDIR": str(build), "PATH": "/usr/bin:/bin", "HOME": str(build)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = out.glob("samzapy-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_holds_every_module_of_the_package(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py")}
    assert modules - names == set()


def test_the_wheel_holds_the_type_information(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    stubs = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.pyi")}
    assert stubs, "samzapy/_speedups.pyi is expected"
    assert stubs | {"samzapy/py.typed"} <= names


def test_the_wheel_holds_nothing_outside_the_package(wheel: zipfile.ZipFile) -> None:
    outside = {
        name
        for name in wheel.namelist()
        if not name.startswith(("samzapy/", "samzapy-0.1.0.dist-info/"))
    }
    assert outside == set()


def test_the_wheel_holds_the_c_extension_where_it_can_be_built(wheel: zipfile.ZipFile) -> None:
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.exists() or subprocess.run(["which", "cc"], capture_output=True).returncode:
        pytest.skip("no C compiler or Python headers here: the extension is optional")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert f"samzapy/_speedups{suffix}" in wheel.namelist()
