"""Flow-template resolution: pure core, no I/O."""

from __future__ import annotations

import re

import pytest

from skillsearch.core.domain import FlowStep, Parameter
from skillsearch.core.errors import SkillInvalidError, ValidationError
from skillsearch.core.templates import coerce_text_value, resolve_steps

PARAMS = (
    Parameter(name="service", type="string", required=True),
    Parameter(name="replicas", type="integer", required=True),
    Parameter(name="ratio", type="number", default=0.5),
    Parameter(name="dry_run", type="boolean", default=False),
    Parameter(name="env", type="string", default="staging", enum=["staging", "production"]),
    Parameter(name="note", type="string"),
)
STEPS = (
    FlowStep(tool="k8s.scale", args={"deployment": "{service}", "replicas": "{replicas}", "dry": "{dry_run}"}),
    FlowStep(tool="metrics.query", args={"q": "rate{{service=\"{service}\"}}[5m]", "ratio": "{ratio}"}),
    FlowStep(tool="notify.send", args={"targets": [{"env": "{env}", "text": "scaled {service} to {replicas}"}],
                                       "note": "{note}", "footer": "note: {note}"}),
)


def test_whole_value_placeholders_keep_their_type() -> None:
    steps, values = resolve_steps(STEPS, PARAMS, {"service": "api", "replicas": 3})
    assert steps[0]["args"] == {"deployment": "api", "replicas": 3, "dry": False}
    assert steps[1]["args"]["ratio"] == 0.5
    assert values["env"] == "staging"


def test_nested_args_and_escaped_braces_are_substituted() -> None:
    steps, _ = resolve_steps(STEPS, PARAMS, {"service": "api", "replicas": 2, "env": "production"})
    assert steps[1]["args"]["q"] == 'rate{service="api"}[5m]'
    assert steps[2]["args"]["targets"] == [{"env": "production", "text": "scaled api to 2"}]


def test_optional_parameter_without_value_drops_whole_argument() -> None:
    steps, _ = resolve_steps(STEPS, PARAMS, {"service": "api", "replicas": 1})
    assert "note" not in steps[2]["args"]
    assert steps[2]["args"]["footer"] == "note: "


def test_step_tool_names_and_order_are_the_templates() -> None:
    steps, _ = resolve_steps(STEPS, PARAMS, {"service": "api", "replicas": 1})
    assert [s["tool"] for s in steps] == [s.tool for s in STEPS]


def test_all_problems_are_reported_in_one_error() -> None:
    with pytest.raises(ValidationError) as info:
        resolve_steps(STEPS, PARAMS, {"replicas": "three", "env": "moon", "colour": "red"})
    problems = {(p["field"], p["code"]) for p in info.value.details["problems"]}
    assert problems == {("parameters.service", "missing"), ("parameters.replicas", "invalid"),
                        ("parameters.env", "invalid"), ("parameters.colour", "unknown")}
    assert info.value.code == "VALIDATION_ERROR"


def test_boolean_is_not_an_integer() -> None:
    with pytest.raises(ValidationError, match="expected integer, got boolean"):
        resolve_steps(STEPS, PARAMS, {"service": "api", "replicas": True})


@pytest.mark.parametrize("sent", [5.0, -0.0, 1e2, 2.0**53])
def test_a_whole_number_written_with_a_fraction_is_an_integer(sent: float) -> None:
    """JSON Schema's ``integer`` takes a number whose fractional part is zero, and hosts send ``5.0``: the
    steps hold the int, so a text placeholder says ``5``, never ``5.0``."""
    steps, values = resolve_steps(STEPS, PARAMS, {"service": "api", "replicas": sent})
    assert type(values["replicas"]) is int and values["replicas"] == sent
    assert type(steps[0]["args"]["replicas"]) is int
    assert steps[2]["args"]["targets"][0]["text"] == f"scaled api to {int(sent)}"
    # A number parameter keeps what was sent.
    steps, _ = resolve_steps(STEPS, PARAMS, {"service": "api", "replicas": 1, "ratio": 2.0})
    assert type(steps[1]["args"]["ratio"]) is float


@pytest.mark.parametrize(("sent", "said"), [
    (5.5, "expected integer, got a number with a fractional part"), (True, "expected integer, got boolean"),
    ("5", "expected integer, got string"), ("5.0", "expected integer, got string"),
    (2.0**53 + 2, "past 2**53"), (float("inf"), "not a finite number"),
])
def test_what_is_no_integer_stays_refused_saying_what_was_expected(sent: object, said: str) -> None:
    with pytest.raises(ValidationError) as info:
        resolve_steps(STEPS, PARAMS, {"service": "api", "replicas": sent})
    (only,) = info.value.details["problems"]
    assert only["field"] == "parameters.replicas" and only["code"] == "invalid" and said in only["message"], only


def test_an_integer_enum_takes_its_member_written_with_a_fraction() -> None:
    size = (Parameter(name="size", type="integer", enum=[1, 3], required=True),)
    steps, values = resolve_steps((FlowStep(tool="t", args={"n": "{size}"}),), size, {"size": 3.0})
    assert steps[0]["args"] == {"n": 3} and type(values["size"]) is int
    with pytest.raises(ValidationError, match="must be one of"):
        resolve_steps((FlowStep(tool="t", args={"n": "{size}"}),), size, {"size": 2.0})


def test_unknown_tool_is_skill_invalid_when_host_names_its_tools() -> None:
    with pytest.raises(SkillInvalidError, match="metrics.query"):
        resolve_steps(STEPS, PARAMS, {"service": "a", "replicas": 1}, known_tools={"k8s.scale", "notify.send"})


def test_default_must_fit_its_type_and_enum() -> None:
    with pytest.raises(ValueError, match="default"):
        Parameter(name="env", type="string", default="moon", enum=["staging"])


@pytest.mark.parametrize(
    ("ptype", "text", "expected"),
    [("integer", "42", 42), ("number", "1.5", 1.5), ("boolean", "TRUE", True), ("string", "007", "007"),
     ("integer", "x", "x")],
)
def test_command_line_values_are_coerced_to_the_schema(ptype: str, text: str, expected: object) -> None:
    assert coerce_text_value(Parameter(name="p", type=ptype), text) == expected  # type: ignore[arg-type]


def test_a_placeholder_before_a_newline_is_text_not_the_whole_value() -> None:
    """``$`` also matched before a final newline: ``"{replicas}\\n"`` became the integer, its newline lost."""
    steps = (FlowStep(tool="shell.write", args={"line": "{replicas}\n", "lines": ["{service}\n", "{replicas}"]}),)
    resolved, _ = resolve_steps(steps, PARAMS, {"service": "api", "replicas": 3})
    assert resolved[0]["args"] == {"line": "3\n", "lines": ["api\n", 3]}


def test_a_parameter_value_is_data_never_a_template() -> None:
    """A value holding ``{other}``, ``{{`` or JSON text is put in as written, in one pass."""
    value = '{note} {{x}} "q"\\ \n{"a": [1]} \u202e日本'
    resolved, _ = resolve_steps(STEPS, PARAMS, {"service": value, "replicas": 1, "note": "N"})
    assert resolved[0]["args"]["deployment"] == value
    assert resolved[1]["args"]["q"] == 'rate{service="' + value + '"}[5m]'


@pytest.mark.parametrize(
    ("ptype", "text", "expected"),
    [("number", "5", 5), ("number", "-2", -2), ("number", "5.0", 5.0), ("number", "1e2", 100.0),
     ("integer", " 7 ", 7), ("integer", "5.0", 5), ("integer", "1e2", 100), ("integer", "5.5", "5.5"),
     ("integer", "1e400", "1e400"),
     ("integer", "1_000", "1_000"), ("number", "1_0.5", "1_0.5"),
     ("number", "nan", "nan"), ("number", "infinity", "infinity"), ("integer", "true", "true"),
     ("integer", "9" * 5000, "9" * 5000)],
)
def test_command_line_numbers_read_as_json_reads_them(ptype: str, text: str, expected: object) -> None:
    """``5`` for a number parameter is the integer 5, as MCP and HTTP take JSON ``5`` (``float()`` made it
    5.0, and a step said ``5.0`` on the command line only); Python's ``1_000`` and ``nan`` are not numbers."""
    value = coerce_text_value(Parameter(name="p", type=ptype), text)  # type: ignore[arg-type]
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(("ptype", "enum", "said"), [
    ("string", [1, 2], "1: expected string, got integer"), ("integer", [], "is empty"),
    ("integer", [True, 2], "true: expected integer, got boolean"), ("integer", [1.5], "1.5: expected integer"),
    ("boolean", [None], "null: null is no value"),
])
def test_an_enum_holds_values_of_its_parameters_type(ptype: str, enum: list[object], said: str) -> None:
    problem = Parameter(name="p", type=ptype, enum=enum).enum_problem()  # type: ignore[arg-type]
    assert problem is not None and re.search(f"enum of parameter 'p'.*{re.escape(said)}", problem), problem
    assert Parameter(name="p", type="number", enum=[1, 2.5]).enum_problem() is None
