"""The blocks of the documents that the walk (test_documents.py) does not run, checked here:
what a command prints, a method shown alone, a listing of the repository. Each block is found
by the marker the walk skips it by, so a block that changes or goes away fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from test_documents import ROOT, Block, _repository_files, blocks

from samzapy import InitableTask, StreamTask
from samzapy.cli.problems import check_job
from samzapy.testing import TestRunner


def _not_run(document: str, reason: str) -> Block:
    """The one block of ``document`` marked ``<!-- not run: ... -->`` with ``reason`` in it."""
    (block,) = [b for b in blocks(document) if b.not_run and reason in b.not_run]
    return block


def _block_before(document: str, block: Block) -> Block:
    found = blocks(document)
    return found[found.index(block) - 1]


def test_validate_prints_the_two_typos_of_configuration_md(tmp_path: Path) -> None:
    """configuration.md, "Unknown keys are errors": the two lines `samzapy validate` prints
    for a file whose only mistakes are those two typos."""
    block = _not_run("docs/configuration.md", "what samzapy validate prints for two typos")
    job = tmp_path / "job.yaml"
    job.write_text(
        "job.name: typos\n"
        "task.class: examples.pageviews.tasks:SafePageViewCounter\n"
        "task.inputs: [x.page-views]\n"
        "task.comit.ms: 5000\n"
        "systems.x.samza.factory: memory\n"
        "systems.x.samza.fetch.treshold: 1000\n"
    )
    assert check_job(str(job), []).problems == block.text.splitlines()


def test_the_init_of_configuration_md_reads_the_yaml_above_it() -> None:
    """configuration.md, "Your own keys": the `init` shown alone (an `InitableTask`'s) reads
    the key the YAML block before it sets, from the task's `context.config`."""
    method = _not_run("docs/configuration.md", "a method of a task class, shown alone")
    fragment = _block_before("docs/configuration.md", method)
    assert fragment.language == "yaml"
    scope: dict[str, Any] = {}
    exec(method.text, scope)  # the document's own code
    seen: list[object] = []

    class Reader(InitableTask, StreamTask):
        def init(self, context: Any) -> None:
            scope["init"](self, context)
            seen.append(context.config["app.output"])

        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            pass

    config = {"job.name": "own-keys", **yaml.safe_load(fragment.text)}
    TestRunner.of(Reader, config).add_input("in", [1]).run(timeout=10)
    assert seen == ["output.page-view-counts"]


def test_the_readme_layout_lists_the_repositorys_folders() -> None:
    """README.md, "Layout": one line per package of samzapy/, then every folder at the top of
    the repository and under tests/."""
    block = _not_run("README.md", "a listing of the repository's folders")
    lines = block.text.splitlines()
    listed = [m[1] for line in lines if (m := re.match(r"samzapy/(\w+)/ ", line))]
    packages = sorted(p.name for p in (ROOT / "samzapy").iterdir() if (p / "__init__.py").exists())
    assert sorted(listed) == packages
    folders = lines[-1].split()
    tests = next(f for f in folders if f.startswith("tests/"))
    assert re.fullmatch(r"tests/\{[\w,]+\}", tests), tests
    tracked = [name.split("/") for name in _repository_files()]
    on_top = {f.rstrip("/") for f in folders if f != tests} | {"samzapy", "tests"}
    assert on_top == {p[0] for p in tracked if len(p) > 1 and not p[0].startswith(".")}
    under_tests = {p[1] for p in tracked if len(p) > 2 and p[0] == "tests"}
    assert set(tests[len("tests/{") : -1].split(",")) == under_tests
