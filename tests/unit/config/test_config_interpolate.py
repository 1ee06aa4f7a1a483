"""${VAR} interpolation of file values from the environment."""

from __future__ import annotations

import pytest

from samzapy.api.errors import ConfigError
from samzapy.config import load_config


def test_set_variable_is_substituted_inside_longer_strings() -> None:
    config = load_config(text="app.dir: /data/${USER}/x\n", env={"USER": "ann"})
    assert config["app.dir"] == "/data/ann/x"


def test_several_references_in_one_value() -> None:
    config = load_config(text="app.url: ${HOST}:${PORT}\n", env={"HOST": "h", "PORT": "1"})
    assert config["app.url"] == "h:1"


def test_default_is_used_when_unset_or_empty() -> None:
    text = "app.a: ${A:-x}\napp.b: ${B:-y}\napp.c: ${C:-z}\n"
    config = load_config(text=text, env={"B": "", "C": "set"})
    assert (config["app.a"], config["app.b"], config["app.c"]) == ("x", "y", "set")


def test_missing_variable_without_default_names_key_and_variable() -> None:
    with pytest.raises(
        ConfigError, match=r"app\.dir refers to \$\{DATA_DIR\}.*DATA_DIR is not set"
    ) as info:
        load_config(text="app.dir: /x/${DATA_DIR}\n", env={})
    assert info.value.key == "app.dir"


def test_whole_value_reference_is_typed_as_a_yaml_scalar() -> None:
    text = (
        "metrics.prometheus.port: ${PORT:-9092}\n"
        "task.drop.producer.errors: ${FLAG:-true}\n"
        "app.ratio: ${RATIO}\n"
        "app.name: ${NAME}\n"
        "app.unset: ${GONE:-null}\n"
    )
    config = load_config(text=text, env={"RATIO": "0.5", "NAME": "007x"})
    assert config["metrics.prometheus.port"] == 9092
    assert config["task.drop.producer.errors"] is True
    assert config["app.ratio"] == 0.5
    assert config["app.name"] == "007x"
    assert config["app.unset"] is None


def test_reference_inside_a_longer_string_stays_text() -> None:
    config = load_config(text="app.a: x${N}\napp.b: ${N}${N}\n", env={"N": "1"})
    assert config["app.a"] == "x1"
    assert config["app.b"] == "11"


def test_text_that_only_looks_like_yaml_is_kept_as_is() -> None:
    config = load_config(text="app.a: ${V}\n", env={"V": "a # not a comment"})
    assert config["app.a"] == "a # not a comment"


def test_double_dollar_escapes_a_literal_reference() -> None:
    config = load_config(text="app.a: $${HOME}/x\napp.b: cost $5\n", env={})
    assert config["app.a"] == "${HOME}/x"
    assert config["app.b"] == "cost $5"


def test_list_items_are_interpolated() -> None:
    config = load_config(text="app.items:\n  - kafka.${T}\n  - ${N}\n", env={"T": "t", "N": "3"})
    assert config["app.items"] == ["kafka.t", 3]
    config = load_config(text="task.inputs:\n  - kafka.${T}\n  - ${N}\n", env={"T": "t", "N": "03"})
    assert config["task.inputs"] == ["kafka.t", "03"]  # a list of strings: as written


@pytest.mark.parametrize(
    ("written", "env"),
    [
        ("010", {}),  # YAML 1.1: octal 8
        ("0777", {}),
        ("1:30", {}),  # YAML 1.1: sexagesimal 90
        ("1_000", {}),
        ("0x1F", {}),
        ("${PASSWORD}", {"PASSWORD": "012345"}),
        ("${PASSWORD}", {"PASSWORD": "1:30.5"}),
    ],
)
def test_a_key_that_takes_text_keeps_a_number_as_written(written: str, env: dict[str, str]) -> None:
    """YAML reads these as numbers; samzapy's text keys (a job id, a password) keep the text
    written, where the number's str() would change them silently. Other keys keep numbers."""
    text = f"job.id: {written}\nsystems.k.sasl.plain.password: {written}\napp.mine: {written}\n"
    config = load_config(text=text, env=env)
    expected = env.get("PASSWORD", written)
    assert config["job.id"] == expected
    assert config["systems.k.sasl.plain.password"] == expected
    assert type(config["app.mine"]) in (int, float)  # the job's own key: YAML's number
    overridden = load_config(text="job.name: j\n", overrides=[f"job.id={expected}"])
    assert overridden["job.id"] == expected


def test_malformed_reference_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"app\.a has a malformed reference '\$\{1X\}'"):
        load_config(text="app.a: ${1X}\n", env={})


def test_unterminated_reference_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"app\.a has an unterminated '\$\{'"):
        load_config(text="app.a: x${Y\n", env={})


def test_environment_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMZAPY_TEST_VAR", "from-env")
    assert load_config(text="app.a: ${SAMZAPY_TEST_VAR}\n")["app.a"] == "from-env"


def test_overrides_and_keys_are_not_interpolated() -> None:
    config = load_config(text="app.${X}: 1\n", overrides=["app.b=${X}"], env={})
    assert config["app.${X}"] == 1
    assert config["app.b"] == "${X}"


@pytest.mark.parametrize("key", ["systems.${SYS}.samza.factory", "task.${WHICH}.ms"])
def test_a_reference_in_a_key_of_samzapys_namespaces_is_an_error(key: str) -> None:
    # Not replaced in keys: kept, it would define a system literally named '${SYS}'.
    with pytest.raises(ConfigError) as info:
        load_config(text=f"{key}: memory\n", env={"SYS": "kafka", "WHICH": "commit"})
    assert info.value.problems == (
        f"key '{key}': ${{...}} is replaced in values only, not in keys; write the name "
        "itself (or give the whole key with --set)",
    )
    assert info.value.key == key


def test_a_reference_inside_a_default_is_an_error() -> None:
    # The shell's ${A:-${B:-z}} is not supported: it gave the text '${B:-z}' as the value.
    with pytest.raises(ConfigError) as info:
        load_config(text="app.a: x${A:-${B:-z}}\n", env={})
    assert info.value.problems == (
        "app.a has a reference inside a default in 'x${A:-${B:-z}}', which is not "
        "supported: give the default as text",
    )
