"""load_config: YAML reading, flattening, duplicates, --set overrides, base defaults, Config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from samzapy.api.errors import ConfigError
from samzapy.config import Config, load_config


def test_flat_and_nested_keys_are_the_same() -> None:
    flat = load_config(text="task.max.concurrency: 4\njob.name: wc\n")
    nested = load_config(text="task:\n  max:\n    concurrency: 4\njob:\n  name: wc\n")
    assert dict(flat) == dict(nested) == {"task.max.concurrency": 4, "job.name": "wc"}


def test_mixed_flat_and_nested_keys() -> None:
    config = load_config(
        text="""
task.max:
  concurrency: 4
task:
  commit.ms: 10
  window: {ms: 5}
"""
    )
    assert dict(config) == {"task.max.concurrency": 4, "task.commit.ms": 10, "task.window.ms": 5}


def test_lists_stay_list_values() -> None:
    config = load_config(text="task:\n  inputs: [kafka.a, kafka.b]\napp.items: [{x: 1}]\n")
    assert config["task.inputs"] == ["kafka.a", "kafka.b"]
    assert config["app.items"] == [{"x": 1}]


def test_same_key_flat_and_nested_is_an_error() -> None:
    text = "task.max.concurrency: 4\ntask:\n  max:\n    concurrency: 5\n"
    with pytest.raises(ConfigError, match=r"key 'task\.max\.concurrency' is given twice") as info:
        load_config(text=text)
    assert info.value.key == "task.max.concurrency"


def test_same_literal_key_twice_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("job.name: a\njob.name: b\n")
    with pytest.raises(ConfigError, match=r"job\.yaml, line 2.*duplicate key 'job\.name'"):
        load_config(path)


def test_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("job.name: wc\ntask:\n  inputs: [a.b\n  class: x\n")
    with pytest.raises(
        ConfigError, match=rf"{re.escape(str(path))}, line \d+, column \d+: invalid YAML"
    ):
        load_config(path)


def test_yaml_syntax_error_in_text_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"<text>, line 2.*invalid YAML"):
        load_config(text="a: 1\nb: c: d\n")


def test_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=r"cannot read config file .*nope\.yaml.*No such file"):
        load_config(path)


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match=r"top level must be a mapping.*got list"):
        load_config(text="- a\n- b\n")


def test_empty_document_is_an_empty_config() -> None:
    assert dict(load_config(text="")) == {}


def test_non_string_key_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"key True under 'app' must be a string"):
        load_config(text="app:\n  true: 1\n")


def test_source_is_the_file_path(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("job.name: wc\n")
    assert load_config(path).source == str(path)
    assert load_config(text="job.name: wc").source is None


def test_overrides_are_typed_and_win_over_the_file() -> None:
    config = load_config(
        text="task.max.concurrency: 2\napp.name: x\n",
        overrides=[
            "task.max.concurrency=4",
            "task.inputs=[a.b, c.d]",
            "task.drop.producer.errors=true",
            "app.name=hello world",
            "app.quoted='5'",
            "app.color=#fff",
            "app.empty=",
            "app.eq=a=b",
        ],
    )
    assert config["task.max.concurrency"] == 4
    assert config["task.inputs"] == ["a.b", "c.d"]
    assert config["task.drop.producer.errors"] is True
    assert config["app.name"] == "hello world"
    assert config["app.quoted"] == "5"
    assert config["app.color"] == "#fff"
    assert config["app.empty"] == ""
    assert config["app.eq"] == "a=b"


def test_override_with_a_mapping_sets_keys_under_it() -> None:
    config = load_config(text="", overrides=["systems.mem={samza.factory: memory}"])
    assert dict(config) == {"systems.mem.samza.factory": "memory"}


def test_override_without_equals_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"--set 'task\.max\.concurrency' must have the form"):
        load_config(text="", overrides=["task.max.concurrency"])


def test_override_with_bad_yaml_is_one_line_naming_the_column() -> None:
    """validate prints a problem per line, run logs them as a list: no excerpt and caret."""
    with pytest.raises(ConfigError) as info:
        load_config(text="", overrides=["task.inputs=[a"])
    assert info.value.problems == (
        "--set task.inputs: value '[a' is not valid YAML at column 3: expected ',' or ']', "
        "but got '<stream end>' (while parsing a flow sequence)",
    )


def test_override_with_a_key_twice_is_an_error_as_in_the_file() -> None:
    with pytest.raises(ConfigError, match=r"found duplicate key 'a'"):
        load_config(text="", overrides=["app={a: 1, a: 2}"])


def test_base_is_under_the_file_and_overrides() -> None:
    config = load_config(
        text="app.b: file\napp.c: file\n",
        base={"app": {"a": "base", "b": "base"}, "app.c": "base"},
        overrides=["app.c=cli"],
    )
    assert dict(config) == {"app.a": "base", "app.b": "file", "app.c": "cli"}


def test_path_and_text_together_are_refused() -> None:
    with pytest.raises(TypeError, match="path or text, not both"):
        load_config("job.yaml", text="a: 1")


def test_all_loading_problems_are_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(text="a.b: 1\na: {b: 2}\napp.x: ${NOPE}\n", env={}, overrides=["broken"])
    assert len(info.value.problems) == 3
    assert str(info.value).startswith("3 configuration problems:\n")
    assert info.value.key == "a.b"


def test_config_is_an_immutable_mapping_with_subset() -> None:
    config = Config(
        {"systems.k.samza.factory": "kafka", "systems.k.x": 1, "systems.kk.y": 2},
        source="job.yaml",
    )
    sub = config.subset("systems.k")
    assert dict(sub) == {"samza.factory": "kafka", "x": 1}
    assert sub.source == "job.yaml"
    assert dict(config.subset("systems.k.", strip=False)) == {
        "systems.k.samza.factory": "kafka",
        "systems.k.x": 1,
    }
    assert len(config) == 3 and "systems.k.x" in config
    with pytest.raises(TypeError):
        config["x"] = 1  # type: ignore[index]
