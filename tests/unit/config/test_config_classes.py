"""The one class loader: every way of failing is a ConfigError naming the key, module and cause."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from samzapy import AsyncStreamTask, StreamTask
from samzapy.api.errors import ConfigError
from samzapy.config.classes import create, load_class, load_task_class, split_class_path

_names = itertools.count()


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], str]:
    """Writes a module with the given source on sys.path; returns its (unique) name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        name = f"classes_case_{next(_names)}"
        (tmp_path / f"{name}.py").write_text(source)
        return name

    return write


TASKS = """\
from samzapy import AsyncStreamTask, StreamTask

class Counter(StreamTask):
    def process(self, envelope, collector, coordinator):
        pass

class Fetcher(AsyncStreamTask):
    async def process_async(self, envelope, collector, coordinator):
        pass

class Outer:
    class Inner(StreamTask):
        pass

class NotATask:
    pass

class AsyncProcess(StreamTask):
    async def process(self, envelope, collector, coordinator):
        pass

class NeedsArgs(StreamTask):
    def __init__(self, url):
        self.url = url

    def process(self, envelope, collector, coordinator):
        pass

class Both(StreamTask, AsyncStreamTask):
    def process(self, envelope, collector, coordinator):
        pass

def count():
    pass

LIMIT = 3
"""


class TestSplitClassPath:
    @pytest.mark.parametrize(
        ("path", "expected"),
        [
            ("pkg.mod:Cls", ("pkg.mod", "Cls")),
            ("pkg.mod:Outer.Inner", ("pkg.mod", "Outer.Inner")),
            ("pkg.mod.Cls", ("pkg.mod", "Cls")),
            ("  mod:Cls ", ("mod", "Cls")),
        ],
    )
    def test_shapes(self, path: str, expected: tuple[str, str]) -> None:
        assert split_class_path(path, key="k") == expected

    @pytest.mark.parametrize("path", ["Cls", ":Cls", "mod:", "a:b:c", "", None, 3])
    def test_bad_shapes_name_the_key(self, path: object) -> None:
        with pytest.raises(
            ConfigError, match=r"^k must be a 'module:Class' \(or 'package.module.Class'\) import"
        ) as info:
            split_class_path(path, key="k")
        assert info.value.key == "k"


class TestLoadTaskClass:
    @pytest.mark.parametrize("attribute", ["Counter", "Fetcher", "Outer.Inner"])
    def test_loads_sync_async_and_nested_tasks(
        self, module: Callable[[str], str], attribute: str
    ) -> None:
        name = module(TASKS)
        cls = load_task_class(f"{name}:{attribute}")
        assert issubclass(cls, StreamTask | AsyncStreamTask)
        assert cls.__qualname__ == attribute

    def test_dotted_form(self, module: Callable[[str], str]) -> None:
        name = module(TASKS)
        assert load_task_class(f"{name}.Counter").__name__ == "Counter"

    def test_missing_module(self) -> None:
        with pytest.raises(
            ConfigError,
            match=r"^task\.class: cannot import module 'no_such_tasks_zz' \(from "
            r"'no_such_tasks_zz:Counter'\): No module named 'no_such_tasks_zz'; it must be "
            r"importable from the job's Python path \(the working directory, then PYTHONPATH\)$",
        ) as info:
            load_task_class("no_such_tasks_zz:Counter")
        assert info.value.key == "task.class"
        assert isinstance(info.value.__cause__, ModuleNotFoundError)

    def test_missing_package_of_a_dotted_module(self) -> None:
        with pytest.raises(ConfigError, match=r"cannot import module 'no_pkg_zz\.tasks'"):
            load_task_class("no_pkg_zz.tasks:Counter")

    def test_module_whose_own_import_is_missing(self, module: Callable[[str], str]) -> None:
        name = module("import no_such_dependency_zz\n")
        with pytest.raises(
            ConfigError,
            match=rf"^task\.class: importing module '{name}' \(from '{name}:Counter'\) failed: "
            r"ModuleNotFoundError: No module named 'no_such_dependency_zz' "
            rf"\({name}\.py, line 1\)$",
        ):
            load_task_class(f"{name}:Counter")

    def test_module_that_raises_while_importing(self, module: Callable[[str], str]) -> None:
        name = module("LIMIT = 3\nRATIO = LIMIT / 0\n")
        with pytest.raises(
            ConfigError,
            match=rf"^task\.class: importing module '{name}' \(from '{name}:Counter'\) failed: "
            rf"ZeroDivisionError: division by zero \({name}\.py, line 2\)$",
        ) as info:
            load_task_class(f"{name}:Counter")
        assert isinstance(info.value.__cause__, ZeroDivisionError)

    def test_module_with_a_syntax_error(self, module: Callable[[str], str]) -> None:
        name = module("class Counter(:\n    pass\n")
        with pytest.raises(
            ConfigError,
            match=rf"^task\.class: importing module '{name}' \(from '{name}:Counter'\) failed: "
            rf"SyntaxError: .*\({name}\.py, line 1\)$",
        ):
            load_task_class(f"{name}:Counter")

    def test_module_that_exits_while_importing(self, module: Callable[[str], str]) -> None:
        name = module("import sys\nsys.exit(3)\n")
        with pytest.raises(ConfigError, match=r"failed: SystemExit: 3 \("):
            load_task_class(f"{name}:Counter")

    def test_missing_class_suggests_a_close_name(self, module: Callable[[str], str]) -> None:
        name = module(TASKS)
        with pytest.raises(
            ConfigError,
            match=rf"^task\.class: module '{name}' has no attribute 'Countr' \(from "
            rf"'{name}:Countr'\); did you mean 'Counter'\?$",
        ):
            load_task_class(f"{name}:Countr")

    def test_missing_nested_class(self, module: Callable[[str], str]) -> None:
        name = module(TASKS)
        with pytest.raises(
            ConfigError, match=rf"^task\.class: '{name}:Outer' has no attribute 'Innr'"
        ):
            load_task_class(f"{name}:Outer.Innr")

    @pytest.mark.parametrize(("attribute", "kind"), [("count", "a function"), ("LIMIT", "an int")])
    def test_not_a_class(self, module: Callable[[str], str], attribute: str, kind: str) -> None:
        name = module(TASKS)
        with pytest.raises(
            ConfigError, match=rf"^task\.class: '{name}:{attribute}' is {kind}, expected a class$"
        ):
            load_task_class(f"{name}:{attribute}")

    def test_a_class_that_is_not_a_task(self, module: Callable[[str], str]) -> None:
        name = module(TASKS)
        with pytest.raises(
            ConfigError,
            match=rf"^task\.class: '{name}:NotATask' is not a task: it must subclass "
            r"samzapy\.StreamTask or samzapy\.AsyncStreamTask$",
        ):
            load_task_class(f"{name}:NotATask")

    def test_a_stream_task_whose_process_is_async_is_refused(
        self, module: Callable[[str], str]
    ) -> None:
        name = module(TASKS)
        with pytest.raises(ConfigError, match=r"process is a coroutine function .*AsyncStreamTask"):
            load_task_class(f"{name}:AsyncProcess")

    def test_a_task_class_that_needs_arguments_is_refused(
        self, module: Callable[[str], str]
    ) -> None:
        name = module(TASKS)
        with pytest.raises(
            ConfigError, match=r"cannot be created with no arguments, .*\(NeedsArgs\(\)\)"
        ):
            load_task_class(f"{name}:NeedsArgs")

    def test_a_class_of_both_task_kinds_is_refused(self, module: Callable[[str], str]) -> None:
        name = module(TASKS)
        with pytest.raises(ConfigError, match=r"subclasses both StreamTask and AsyncStreamTask"):
            load_task_class(f"{name}:Both")


class TestLoadClassAndCreate:
    def test_base_names_the_expected_kind(self, module: Callable[[str], str]) -> None:
        name = module(TASKS)
        with pytest.raises(
            ConfigError, match=rf"^my\.key: '{name}:NotATask' is not a widget factory$"
        ) as info:
            load_class(f"{name}:NotATask", key="my.key", base=StreamTask, what="a widget factory")
        assert info.value.key == "my.key"

    def test_base_without_a_description_names_the_base(self, module: Callable[[str], str]) -> None:
        name = module(TASKS)
        with pytest.raises(ConfigError, match=r"is not samzapy\.api\.task\.StreamTask$"):
            load_class(f"{name}:NotATask", key="k", base=StreamTask)

    def test_create_builds_with_no_arguments(self, module: Callable[[str], str]) -> None:
        name = module(TASKS)
        assert type(create(f"{name}:Counter", key="k", base=StreamTask)).__name__ == "Counter"

    def test_create_failure_names_the_key_and_the_cause(self, module: Callable[[str], str]) -> None:
        name = module("class Needs:\n    def __init__(self, url):\n        self.url = url\n")
        with pytest.raises(
            ConfigError,
            match=rf"^k: creating '{name}:Needs' with no arguments failed: TypeError: .*url",
        ):
            create(f"{name}:Needs", key="k")
