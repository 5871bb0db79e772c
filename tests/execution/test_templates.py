import pytest

from agentensemble import Ensemble, PromptTemplateError, ScriptedModel, Task
from agentensemble.execution import resolve_template
from agentensemble.models import UserMessage


@pytest.mark.parametrize(
    ("template", "inputs", "expected"),
    [
        ("{a} and {a}", {"a": "X"}, "X and X"),
        ("Hello {name}", {"name": ""}, "Hello "),
        ("{under_score}", {"under_score": "ok"}, "ok"),
        ("{{escaped}} and {normal}", {"normal": "substituted"}, "{escaped} and substituted"),
        ("{{topic}}", {"topic": "ignored"}, "{topic}"),
        ("Keep {} and {a b} and { x } and {1}", {}, "Keep {} and {a b} and { x } and {1}"),
        (
            "{my-var}, {user.name}, {thème}",
            {"my-var": "a", "user.name": "b", "thème": "c"},
            "a, b, c",
        ),
        ('JSON {"json": 1} stays', None, 'JSON {"json": 1} stays'),
        ("{x}", {"x": "{y}"}, "{y}"),
        ("{x}", {"x": None}, ""),
        ("{topic}", {"topic": "AI", "extra": "ignored"}, "AI"),
        ("", None, ""),
        ("   ", None, "   "),
        ("{{a}}{b}", {"b": "{{a}}"}, "{a}{{a}}"),
    ],
)
def test_resolution(template: str, inputs: dict[str, str | None] | None, expected: str) -> None:
    assert resolve_template(template, inputs) == expected


def test_every_missing_variable_is_reported_in_order_of_appearance() -> None:
    with pytest.raises(PromptTemplateError) as caught:
        resolve_template("{b} then {a} then {b} and {c}", {"c": "here"})
    assert caught.value.missing_variables == ("b", "a")
    assert caught.value.template == "{b} then {a} then {b} and {c}"
    assert str(caught.value) == (
        "Missing template variables: [b, a]. Provide them in ensemble.run(inputs). "
        "Template: '{b} then {a} then {b} and {c}'"
    )


def test_long_templates_are_truncated_in_the_message_only() -> None:
    template = "{missing} " + "x" * 200
    with pytest.raises(PromptTemplateError) as caught:
        resolve_template(template, None)
    assert str(caught.value).endswith(f"Template: '{template[:100]}...'")
    assert caught.value.template == template


def test_run_inputs_override_ensemble_inputs_and_tasks_are_not_changed() -> None:
    llm = ScriptedModel(["one", "two"])
    first = Task("Research {topic} for {audience}", "Notes on {topic}")
    second = Task("Write for {audience}", context=[first])
    ensemble = Ensemble(
        tasks=[first, second], llm=llm, inputs={"topic": "bees", "audience": "kids"}
    )

    output = ensemble.run(inputs={"audience": "experts"})

    assert output.task_outputs[0].task_description == "Research bees for experts"
    first_prompt, second_prompt = llm.requests[0].messages[1], llm.requests[1].messages[1]
    assert isinstance(first_prompt, UserMessage)
    assert isinstance(second_prompt, UserMessage)
    assert "## Expected Output\nNotes on bees" in first_prompt.text
    assert first.description == "Research {topic} for {audience}"
    assert output.output_for(first) is output.task_outputs[0]
    assert output.output_for(second) is output.task_outputs[1]
    assert "Research bees for experts" in second_prompt.text


def test_a_brace_in_either_text_is_resolved_in_every_run() -> None:
    llm = ScriptedModel(["one", "two"])
    ensemble = Ensemble(tasks=[Task("Write the answer", "A {{literal}} answer")], llm=llm)

    ensemble.run()
    ensemble.run(inputs={"literal": "ignored"})

    prompts = [request.messages[1].text for request in llm.requests]
    assert len(prompts) == 2
    for prompt in prompts:
        assert "## Task\nWrite the answer" in str(prompt)
        assert "## Expected Output\nA {literal} answer" in str(prompt)


def test_a_missing_name_in_any_script_is_an_error() -> None:
    with pytest.raises(PromptTemplateError) as raised:
        resolve_template("Hello {thème} and {名前}", {})
    assert raised.value.missing_variables == ("thème", "名前")


def test_a_dotted_or_dashed_name_without_an_input_is_kept_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = "print(f'{self.name}') on {YYYY-MM-DD} with {{user.name}}"
    assert resolve_template(text, {}) == text
    (warning,) = [r for r in caplog.records if r.name == "agentensemble.templates"]
    assert "{self.name}, {YYYY-MM-DD}" in warning.getMessage()
