"""What the walk (test_documents.py) cannot run in README.md and docs/*.md, checked here.

- Blocks marked ``<!-- not run: ... -->`` whose content the code can check: what a command
  prints, a method shown alone, a listing of the repository, log samples and jq filters. Each
  is found by its marker, so a block that changes or goes away fails here.
- Every ``samzapy`` command line of the documents (synopses, prose) against the parser, both
  ways, and every configuration key they name against the schema."""

from __future__ import annotations

import argparse
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_documents import DOCUMENTS, ROOT, SHELL, Block, blocks

from samzapy import IncomingMessageEnvelope, InitableTask, StreamTask, SystemStreamPartition
from samzapy.cli.library_logs import (
    LIBRARY_LOG_INTERVAL_S,
    TRANSIENT_TEMPLATE,
    Suppressed,
    library_fields,
    suppressed_fields,
)
from samzapy.cli.main import _parser
from samzapy.cli.problems import check_job
from samzapy.cli.record_lines import describe
from samzapy.config.schema import KNOWN_KEYS, NAMESPACES, lookup
from samzapy.container.consumers import InputSerdes
from samzapy.control.wire import (
    EndOfStreamMessage,
    WatermarkMessage,
    encode_control,
    frame_with_origin,
    origin_prefix,
)
from samzapy.system.serde import JsonSerde, StringSerde
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
    # Tracked files only: a walk in the checkout (`make demo`, Spark) leaves folders behind.
    listed_by_git = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    tracked = [name.split("/") for name in listed_by_git.split("\0") if name]
    on_top = {f.rstrip("/") for f in folders if f != tests} | {"samzapy", "tests"}
    assert on_top == {p[0] for p in tracked if len(p) > 1 and not p[0].startswith(".")}
    under_tests = {p[1] for p in tracked if len(p) > 2 and p[0] == "tests"}
    assert set(tests[len("tests/{") : -1].split(",")) == under_tests


def test_the_plan_lines_of_api_md_are_what_samzapy_plan_prints(tmp_path: Path) -> None:
    """api.md, "Windows": the lines shown are those `samzapy plan window-app.yaml` prints for
    the two files the section saves. (In a process of its own: the command sets up the
    process's logging, which the tests run after this one read.)"""
    shown = _not_run("docs/api.md", "the lines samzapy plan printed above")
    saved = [b for b in blocks("docs/api.md") if b.file in ("window_app.py", "window-app.yaml")]
    assert len(saved) == 2
    for block in saved:
        assert block.file is not None
        (tmp_path / block.file).write_text(block.text)
    done = subprocess.run(
        [sys.executable, "-m", "samzapy", "plan", "window-app.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    lines = shown.text.splitlines()
    start = printed.index(lines[0])
    assert printed[start : start + len(lines)] == lines


# -- the commands the documents name ------------------------------------------------------------

_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_FENCED = re.compile(r"^```.*?^```", re.M | re.S)
#: Where a command line ends: a pipe, a redirection, a list, a comment.
_END = re.compile(r"^(\||>|<|;|&&|\|\||#.*)$")


def _samzapy_commands() -> list[tuple[str, list[str]]]:
    """Every `samzapy ...` command line of the documents, with where it is (`doc:line`):
    in the code spans of the prose and in the shell blocks, run or not."""
    found: list[tuple[str, list[str]]] = []
    for document in DOCUMENTS:
        text = (ROOT / document).read_text(encoding="utf-8")
        prose = _FENCED.sub(lambda m: "\n" * m[0].count("\n"), text)  # keeps line numbers
        lines = [(text.count("\n", 0, m.start()) + 1, m[1]) for m in _SPAN.finditer(prose)]
        for block in blocks(document):
            if block.language in SHELL:
                lines += [(block.line + n + 1, x) for n, x in enumerate(block.text.splitlines())]
        for number, line in lines:
            if line.startswith("="):  # a marker such as `===== end of samzapy thread dump`
                continue
            for match in re.finditer(r"(?:^|[\s($])(?<!from )(?<!= )samzapy +(\S.*)", line):
                words: list[str] = []
                for word in match[1].split():
                    if _END.match(word):
                        break
                    words.append(word.strip("[]"))
                # Not `samzapy .`, prose, `from samzapy import` nor `===== samzapy thread dump`.
                if re.fullmatch(r"[a-z]+|--[a-z]+", words[0]):
                    found.append((f"{document}:{number}", words))
    return found


COMMANDS = _samzapy_commands()


def _subcommand(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser of the (sub)command ``words`` starts with, and the words after its name."""
    parser = _parser()
    while True:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions:
            return parser, words
        name = words[0] if words else None
        if name is not None and name.startswith("-"):  # `samzapy --version`
            return parser, words
        assert name in actions[0].choices, f"no command {name!r}: {sorted(actions[0].choices)}"
        parser, words = actions[0].choices[name], words[1:]


def test_the_documents_name_commands() -> None:
    first = {words[0] for _, words in COMMANDS}
    assert first == {"run", "validate", "plan", "tail", "checkpoint", "--version"}


def _options() -> Iterator[tuple[tuple[str, ...], str]]:
    """Every option of samzapy's parsers, by the (sub)command it belongs to (``()``: the
    top level), help aside."""
    pending: list[tuple[tuple[str, ...], argparse.ArgumentParser]] = [((), _parser())]
    while pending:
        path, parser = pending.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending += [((*path, name), sub) for name, sub in action.choices.items()]
            elif action.option_strings and "--help" not in action.option_strings:
                yield path, max(action.option_strings, key=len)


def test_every_command_and_flag_of_samzapy_is_in_the_documents() -> None:
    """The other way round: each option of each command is named in a documented command
    line of that command; `--set`, which every command reading a job file takes, is named
    once for all of them, in configuration.md's section about it."""
    named: set[tuple[tuple[str, ...], str]] = set()
    for _, words in COMMANDS:
        rest = _subcommand(words)[1]
        path = tuple(words[: len(words) - len(rest)])
        named |= {(path, word.split("=", 1)[0]) for word in rest if word.startswith("--")}
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    (where,) = re.findall(r"^`--set KEY=VALUE` \(repeatable, on every command [^)]*\)", text, re.M)
    named |= {(tuple(c.split()), "--set") for c in re.findall(r"`([a-z ]+)`", where)}
    missing = [
        " ".join((*path, option)) for path, option in _options() if (path, option) not in named
    ]
    assert missing == []


@pytest.mark.parametrize(("where", "words"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_command_and_flag_the_documents_name_exists(where: str, words: list[str]) -> None:
    """`samzapy --help` and each command's help: every command, flag and choice named in the
    documents (`--log-format json|console` names two choices) is one of samzapy's."""
    parser, rest = _subcommand(words)
    options = {o: a for a in parser._actions for o in a.option_strings}
    for index, word in enumerate(rest):
        if not word.startswith("--"):
            continue
        flag = word.split("=", 1)[0]
        assert flag in options, f"{where}: samzapy {' '.join(words)}: no {flag}"
        choices = options[flag].choices
        given = word.split("=", 1)[1] if "=" in word else (rest[index + 1 :] or [""])[0]
        if choices is not None and given.islower():
            assert set(given.split("|")) <= set(choices), f"{where}: {flag} {given}"


# -- the keys the documents name ----------------------------------------------------------------

#: Keys the documents name as keys samzapy refuses, as Samza's that it does not read, or as a
#: typo.
NOT_KEYS = {
    "task.comit.ms",
    "task.checkpoint.path",
    "metrics.reporter.<name>.class",
    "job.factory.class",
    "job.systemstreampartition.grouper.factory",
    "task.name.grouper.factory",
    "streams.<id>.samza.priority",
    "systems.<name>.default.stream.samza.priority",
    "systems.<name>.default.stream.samza.bootstrap",
    "systems.<name>.default.stream.samza.key.serde",
}
_KEY = re.compile(rf"(?<![\w.<>/-])((?:{'|'.join(sorted(NAMESPACES))})\.[\w.<>*-]*[\w>*])")


def _named_keys() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        text = (ROOT / document).read_text(encoding="utf-8")
        for span in _SPAN.finditer(text):
            for match in _KEY.finditer(span[1]):
                key, after = match[1], span[1][match.end() :]
                if key.endswith((".yaml", ".py")):  # a file: job.yaml, container/systems.py
                    continue
                if re.match(r" [\w<]", after):  # a name with spaces: `task.Partition 0`
                    continue
                line = text.count("\n", 0, span.start()) + 1
                found.append((f"{document}:{line}", key))
    return found


def _is_known(key: str) -> bool:
    """A key of the schema, or the start of some (`systems.<name>.`, `stores.<op_id>.*`,
    `stores.<table_id>.<key>`)."""
    concrete = re.sub(r"<[^>]+>", "x", re.sub(r"\.<[^>]+>$", ".*", key)).removesuffix(".*")
    patterns = [re.sub(r"<[^>]+>", "x", spec.pattern) for spec in KNOWN_KEYS]
    return bool(lookup(concrete)) or any(p.startswith(concrete + ".") for p in patterns)


def test_every_key_the_documents_name_is_in_the_schema() -> None:
    named = _named_keys()
    assert len(named) > 300
    unknown = [f"{where}: {key}" for where, key in named if key not in NOT_KEYS]
    assert [u for u in unknown if not _is_known(u.split(": ", 1)[1])] == []
    assert not any(_is_known(key) for key in NOT_KEYS)


# -- the log events the documents filter on ------------------------------------------------------


def _logged_names() -> tuple[set[str], set[str]]:
    """The event names samzapy logs (string literals), and the fields it logs them with
    (keyword arguments and string keys): an over-approximation, enough to catch a rename."""
    literals: set[str] = set()
    keywords: set[str] = set()
    for path in (ROOT / "samzapy").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        literals |= set(re.findall(r"\"([a-z][a-z_]*)\"", text))
        keywords |= set(re.findall(r"\b([a-z][a-z_]*)=", text))
    return literals, keywords | literals


def test_the_jq_filters_of_deploy_md_name_events_and_fields_samzapy_logs() -> None:
    """deploy.md, "Reading the JSON logs with jq": every event a filter selects is one that
    samzapy logs, and every field it picks is one that some event carries."""
    block = _not_run("docs/deploy.md", "filters for jq")
    events, fields = _logged_names()
    selected = re.findall(r"\.event == \"(\w+)\"", block.text)
    selected += [
        n for group in re.findall(r"IN\(([^)]*)\)", block.text) for n in re.findall(r"\w+", group)
    ]
    prefixes = re.findall(r"startswith\(\"(\w+)\"\)", block.text)
    assert len(selected) > 8 and len(prefixes) >= 3
    assert sorted(set(selected) - events) == []
    assert [p for p in prefixes if not any(e.startswith(p) for e in events)] == []
    picked = {
        f for group in re.findall(r"\{([^}]*)\}", block.text) for f in re.findall(r"\w+", group)
    }
    picked |= set(re.findall(r"\.([a-z_]+)", block.text)) - {"event", "value"}
    assert len(picked) > 20
    assert sorted(picked - fields) == []


def test_the_library_log_lines_of_deploy_md_are_what_samzapy_writes() -> None:
    """deploy.md, "Libraries' log lines": the sample's two events, for aiokafka's heartbeat
    error on a healthy job and a minute of its transient connection errors left out, are
    what samzapy makes of them (beside the timestamp, job and container every event has)."""
    block = _not_run("docs/deploy.md", "sample output of a job whose broker went away")
    shown = [json.loads(line) for line in block.text.splitlines()]
    context = {"timestamp", "job", "container"}
    assert all(context <= set(line) for line in shown)
    logged, suppressed = ({k: v for k, v in line.items() if k not in context} for line in shown)
    level = logging.getLevelNamesMapping()[logged["library_level"].upper()]
    record = logging.LogRecord(
        logged["logger"], level, "group_coordinator.py", 1, logged["message"], None, None
    )
    assert logged == library_fields(record, failing=False)
    level = logging.getLevelNamesMapping()[suppressed["library_level"].upper()]
    left_out = Suppressed("aiokafka", TRANSIENT_TEMPLATE, suppressed["suppressed"], level)
    window = LIBRARY_LOG_INTERVAL_S
    assert suppressed == suppressed_fields(left_out, failing=False, window_s=window)


def test_the_tail_lines_of_deploy_md_are_what_samzapy_tail_prints() -> None:
    """deploy.md, "Looking at a stream": each line of the intermediate stream's sample (a
    message with its origin, one that does not decode, a watermark, an end-of-stream) is the
    line samzapy tail prints for the record it describes, as the pipeline's job reads it
    (string keys, JSON messages, framed)."""
    block = _not_run("docs/deploy.md", "sample output of the pipeline's intermediate stream")
    command, *texts = block.text.splitlines()
    assert command.startswith("$ samzapy tail ")
    serdes = InputSerdes(key=StringSerde(), msg=JsonSerde(), framed=True)
    for text in texts:
        shown = json.loads(text)
        system, stream = shown["stream"].split(".", 1)
        ssp = SystemStreamPartition(system, stream, shown["partition"])
        if "control" in shown:
            control: EndOfStreamMessage | WatermarkMessage = EndOfStreamMessage(
                shown["task"], shown["task_count"]
            )
            if shown["control"] == "watermark":
                control = WatermarkMessage(shown["task"], shown["task_count"], shown["watermark"])
            key, record = None, encode_control(control)
        elif "error" in shown:
            key, record = shown["key"].encode(), bytes.fromhex(shown["hex"])
        else:
            origin = shown["origin"]
            prefix = origin_prefix(bytes.fromhex(origin["source"]), origin["epoch"])
            body = JsonSerde().to_bytes(shown["value"])
            key = shown["key"].encode()
            record = frame_with_origin(prefix, origin["offset"], origin["ordinal"], body)
        envelope = IncomingMessageEnvelope(
            ssp, str(shown["offset"]), key, record, timestamp=shown["timestamp"]
        )
        assert describe(envelope, serdes) == shown
