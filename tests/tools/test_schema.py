"""Argument schemas and validation: schemas built from signatures (pydantic), raw JSON Schema tools
(``Tool.from_schema``), the ``strip_titles`` helper, and the ``invalid_arguments`` errors a model reads."""

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from tether.errors import ConfigInvalid, InvalidArguments
from tether.tools.base import Tool, tool
from tether.tools.schema import MAX_REPORTED_ERRORS, strip_titles


class Point(BaseModel):
    x: int
    y: int = 0


class Book(BaseModel):
    title: str
    pages: int


def _invalid(t: Tool, arguments: dict[str, Any]) -> InvalidArguments:
    """The error ``t.bind(arguments)`` raises."""
    with pytest.raises(InvalidArguments) as caught:
        t.bind(arguments)
    return caught.value


# --- schemas built from signatures ----------------------------------------------------------------------------


@tool
def typed(count: int, name: str, ratio: float, on: bool, tags: list[str]) -> None:
    """Every basic type."""


@tool
def defaults(required: int, greeting: str = "hi", limit: int | None = None) -> None:
    """Defaults and Optional."""


@tool
def nested(p: Point, books: list[Book]) -> None:
    """Nested models."""


def test_basic_types_map_to_json_schema_types() -> None:
    properties = typed.parameters["properties"]
    assert properties["count"] == {"type": "integer"}
    assert properties["name"] == {"type": "string"}
    assert properties["ratio"] == {"type": "number"}
    assert properties["on"] == {"type": "boolean"}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}}


def test_parameters_without_default_are_required_in_signature_order() -> None:
    assert typed.parameters["required"] == ["count", "name", "ratio", "on", "tags"]


def test_defaults_are_shown_and_make_a_parameter_optional() -> None:
    schema = defaults.parameters
    assert schema["required"] == ["required"]
    assert schema["properties"]["greeting"] == {"type": "string", "default": "hi"}


def test_optional_parameter_accepts_null() -> None:
    limit = defaults.parameters["properties"]["limit"]
    assert limit["default"] is None
    assert {"type": "null"} in limit["anyOf"]
    assert {"type": "integer"} in limit["anyOf"]


def test_function_schema_is_a_closed_object() -> None:
    schema = typed.parameters
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False


def test_nested_models_are_referenced_from_defs() -> None:
    schema = nested.parameters
    assert schema["properties"]["p"] == {"$ref": "#/$defs/Point"}
    assert schema["properties"]["books"] == {"type": "array", "items": {"$ref": "#/$defs/Book"}}
    assert schema["$defs"]["Point"]["properties"] == {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}}
    assert schema["$defs"]["Point"]["required"] == ["x"]


def test_title_keywords_are_stripped_everywhere() -> None:
    schema = nested.parameters
    assert "title" not in schema
    assert "title" not in schema["$defs"]["Point"]
    assert all("title" not in prop for prop in schema["$defs"]["Point"]["properties"].values())
    assert all("title" not in prop for prop in schema["properties"].values())


def test_property_named_title_is_kept() -> None:
    @tool
    def publish(title: str, body: str) -> None:
        """Publish."""

    assert publish.parameters["properties"]["title"] == {"type": "string"}
    assert nested.parameters["$defs"]["Book"]["properties"]["title"] == {"type": "string"}


def test_parameter_names_that_clash_with_pydantic_attributes_are_shown_as_named() -> None:
    @tool
    def clash(json: int, model_config: str, model_fields: bool, schema: float, copy: str) -> None:
        """Names pydantic uses itself."""

    assert list(clash.parameters["properties"]) == ["json", "model_config", "model_fields", "schema", "copy"]
    assert clash.parameters["required"] == ["json", "model_config", "model_fields", "schema", "copy"]


async def test_parameter_names_that_clash_with_pydantic_attributes_reach_the_function() -> None:
    @tool
    def clash(json: int, model_config: str, model_fields: bool, schema: float, copy: str) -> tuple[Any, ...]:
        """Names pydantic uses itself."""
        return (json, model_config, model_fields, schema, copy)

    arguments = {"json": "7", "model_config": "c", "model_fields": True, "schema": 2.5, "copy": "x"}
    assert await clash.bind(arguments)() == (7, "c", True, 2.5, "x")


async def test_parameters_named_like_internal_field_names_are_not_mixed_up() -> None:
    @tool
    def swapped(p1: int, p0: str) -> tuple[int, str]:
        """Parameter names that look like generated field names."""
        return (p1, p0)

    assert await swapped.bind({"p1": 1, "p0": "zero"})() == (1, "zero")


async def test_positional_only_parameters_are_passed_positionally() -> None:
    @tool
    def positional(a: int, b: int, /, c: int, *, d: int = 4) -> tuple[int, int, int, int]:
        """Mixed parameter kinds."""
        return (a, b, c, d)

    assert positional.parameters["required"] == ["a", "b", "c"]
    assert await positional.bind({"a": 1, "b": 2, "c": 3})() == (1, 2, 3, 4)


def test_var_positional_is_rejected() -> None:
    def spread(*values: int) -> None:
        """Star args."""

    with pytest.raises(ConfigInvalid, match="values") as caught:
        tool(spread)
    assert caught.value.code == "config_invalid"


def test_var_keyword_is_rejected() -> None:
    def options(**settings: int) -> None:
        """Star-star kwargs."""

    with pytest.raises(ConfigInvalid, match="settings"):
        tool(options)


# --- per-parameter descriptions --------------------------------------------------------------------------------


def google(a: int, b: str = "") -> None:
    """Google style.

    Args:
        a: The a.
        b (str): The b.
    """


def numpy(a: int, b: str = "") -> None:
    """NumPy style.

    Parameters
    ----------
    a : int
        The a.
    b : str
        The b.
    """


def sphinx(a: int, b: str = "") -> None:
    """Sphinx style.

    :param a: The a.
    :param str b: The b.
    """


@pytest.mark.parametrize("function", [google, numpy, sphinx])
def test_docstring_parameter_descriptions_reach_the_schema(function: Any) -> None:
    t = tool(function)
    assert t.parameters["properties"]["a"] == {"type": "integer", "description": "The a."}
    assert t.parameters["properties"]["b"] == {"type": "string", "default": "", "description": "The b."}


@pytest.mark.parametrize(("function", "description"), [(google, "Google"), (numpy, "NumPy"), (sphinx, "Sphinx")])
def test_docstring_sections_stay_out_of_the_tool_description(function: Any, description: str) -> None:
    assert tool(function).description == f"{description} style."


def test_undocumented_parameter_has_no_description() -> None:
    assert "description" not in defaults.parameters["properties"]["required"]


def test_description_of_a_nested_model_parameter_is_kept_next_to_its_ref() -> None:
    @tool
    def move(p: Point) -> None:
        """Move.

        Args:
            p: Where to.
        """

    assert move.parameters["properties"]["p"] == {"$ref": "#/$defs/Point", "description": "Where to."}


def test_annotated_field_description_is_kept_when_the_docstring_is_silent() -> None:
    @tool
    def paged(page: Annotated[int, Field(ge=1, description="1-based page number.")] = 1) -> None:
        """Paged listing."""

    assert paged.parameters["properties"]["page"] == {
        "type": "integer",
        "minimum": 1,
        "default": 1,
        "description": "1-based page number.",
    }


# --- validating function tools (pydantic) -----------------------------------------------------------------------


async def test_numeric_string_is_coerced_to_int() -> None:
    @tool
    def echo(n: int) -> int:
        """Echo."""
        return n

    result = await echo.bind({"n": "3"})()
    assert result == 3
    assert type(result) is int


async def test_nested_object_is_validated_into_the_model() -> None:
    @tool
    def where(p: Point) -> Point:
        """Where."""
        return p

    assert await where.bind({"p": {"x": "1"}})() == Point(x=1, y=0)


def test_missing_required_field_is_named() -> None:
    error = _invalid(defaults, {})
    assert error.code == "invalid_arguments"
    assert "- required: required field is missing" in error.message
    assert "'defaults'" in error.message


def test_wrong_type_names_the_field_and_the_value() -> None:
    error = _invalid(defaults, {"required": "many"})
    assert error.code == "invalid_arguments"
    assert "- required: " in error.message
    assert "'many'" in error.message


def test_nested_error_has_a_dotted_path() -> None:
    error = _invalid(nested, {"p": {"x": "left"}, "books": []})
    assert "- p.x: " in error.message


def test_missing_nested_field_has_a_dotted_path() -> None:
    error = _invalid(nested, {"p": {"x": 1}, "books": [{"title": "T"}]})
    assert "- books.0.pages: required field is missing" in error.message


def test_extra_field_is_rejected_and_named() -> None:
    error = _invalid(defaults, {"required": 1, "colour": "red"})
    assert error.code == "invalid_arguments"
    assert "- colour: unexpected field; remove it" in error.message


async def test_a_tool_with_extra_arguments_ignore_drops_fields_it_does_not_take_and_runs() -> None:
    @tool(extra_arguments="ignore")
    def greet(name: str, greeting: str = "hi") -> str:
        """Greet someone."""
        return f"{greeting} {name}"

    assert await greet.bind({"name": "Ada", "reason": "the user asked", "greeting": "hello"})() == "hello Ada"
    assert greet.extra_arguments == "ignore"
    assert "additionalProperties" not in greet.parameters
    assert "- greeting: Input should be a valid string" in _invalid(greet, {"name": "Ada", "greeting": 5}).message


async def test_extra_arguments_ignore_keeps_positional_only_parameters_working() -> None:
    def scaled(value: int, /, factor: int = 2) -> int:
        """Scale a value."""
        return value * factor

    scaled_tool = Tool.from_function(scaled, extra_arguments="ignore")
    assert await scaled_tool.bind({"value": 3, "factor": 3, "why": "because"})() == 9


def test_extra_arguments_are_refused_by_default_and_the_schema_says_so() -> None:
    assert defaults.extra_arguments == "refuse"
    assert defaults.parameters["additionalProperties"] is False


def test_extra_arguments_takes_only_its_two_words() -> None:
    def plain(a: int) -> int:
        """Plain."""
        return a

    with pytest.raises(ConfigInvalid, match="extra_arguments must be 'refuse' or 'ignore', not 'allow'"):
        Tool.from_function(plain, extra_arguments="allow")  # type: ignore[arg-type]


def test_every_offending_field_is_named() -> None:
    error = _invalid(typed, {"count": "x", "name": 1})
    for field in ("count", "name", "ratio", "on", "tags"):
        assert f"- {field}: " in error.message


def test_errors_past_the_limit_are_counted_not_listed() -> None:
    names = [f"arg{i}" for i in range(MAX_REPORTED_ERRORS + 2)]
    t = Tool.from_schema(
        "many", "Many.", {"type": "object", "properties": {n: {"type": "integer"} for n in names}}, lambda a: a
    )
    error = _invalid(t, dict.fromkeys(names, "x"))
    assert error.message.count("\n- arg") == MAX_REPORTED_ERRORS
    assert error.message.endswith("- ... and 2 more")


def test_function_tool_errors_past_the_limit_are_counted_not_listed() -> None:
    def wide(a0: int, a1: int, a2: int, a3: int, a4: int, a5: int, a6: int, a7: int, a8: int, a9: int) -> None:
        """Ten required parameters."""

    error = _invalid(tool(wide), {})
    assert error.message.count("required field is missing") == MAX_REPORTED_ERRORS
    assert error.message.endswith(f"- ... and {10 - MAX_REPORTED_ERRORS} more")


# --- raw JSON Schema tools --------------------------------------------------------------------------------------

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer"},
        "filter": {
            "type": "object",
            "properties": {"lang": {"type": "string"}},
            "required": ["lang"],
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


def _raw(schema: dict[str, Any]) -> Tool:
    return Tool.from_schema("search", "Search.", schema, lambda arguments: arguments)


def test_raw_schema_missing_required_is_named() -> None:
    error = _invalid(_raw(SEARCH_SCHEMA), {})
    assert error.code == "invalid_arguments"
    assert "'query' is a required property" in error.message


def test_raw_schema_wrong_type_is_named() -> None:
    error = _invalid(_raw(SEARCH_SCHEMA), {"query": "q", "limit": "3"})
    assert "- limit: '3' is not of type 'integer'" in error.message


def test_raw_schema_nested_errors_have_a_dotted_path() -> None:
    error = _invalid(_raw(SEARCH_SCHEMA), {"query": "q", "filter": {"lang": 5}})
    assert "- filter.lang: 5 is not of type 'string'" in error.message


def test_raw_schema_missing_nested_field_names_its_parent_and_the_field() -> None:
    error = _invalid(_raw(SEARCH_SCHEMA), {"query": "q", "filter": {}})
    assert "- filter: 'lang' is a required property" in error.message


def test_raw_schema_closed_object_names_the_extra_field() -> None:
    error = _invalid(_raw(SEARCH_SCHEMA), {"query": "q", "colour": "red"})
    assert error.code == "invalid_arguments"
    assert "'colour'" in error.message


async def test_raw_schema_passes_the_arguments_as_one_dict() -> None:
    arguments = {"query": "q", "filter": {"lang": "en"}}
    assert await _raw(SEARCH_SCHEMA).bind(arguments)() == arguments


async def test_raw_schema_allows_extra_fields_when_the_schema_does() -> None:
    open_schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    assert await _raw(open_schema).bind({"query": "q", "colour": "red"})() == {"query": "q", "colour": "red"}


async def test_raw_schema_with_extra_arguments_ignore_drops_what_properties_do_not_name() -> None:
    t = Tool.from_schema("search", "Search.", SEARCH_SCHEMA, lambda arguments: arguments, extra_arguments="ignore")
    assert await t.bind({"query": "q", "colour": "red", "limit": 2})() == {"query": "q", "limit": 2}
    assert "- limit: '3' is not of type 'integer'" in _invalid(t, {"query": "q", "limit": "3", "x": 1}).message


async def test_empty_schema_accepts_any_object() -> None:
    assert await _raw({}).bind({"anything": [1, 2]})() == {"anything": [1, 2]}


@pytest.mark.parametrize("schema", [{}, {"type": "object"}, {"required": []}])
def test_shown_schema_always_has_object_type_and_properties(schema: dict[str, Any]) -> None:
    shown = _raw(schema).parameters
    assert shown["type"] == "object"
    assert shown["properties"] == {}


def test_shown_schema_keeps_the_given_properties_and_keywords() -> None:
    shown = _raw(SEARCH_SCHEMA).parameters
    assert shown == SEARCH_SCHEMA


def test_schema_without_type_but_with_properties_is_shown_as_an_object() -> None:
    shown = _raw({"properties": {"q": {"type": "string"}}}).parameters
    assert shown == {"type": "object", "properties": {"q": {"type": "string"}}}


@pytest.mark.parametrize("kind", ["array", "string", "null", ["object", "null"]])
def test_schema_of_another_type_than_object_is_rejected(kind: Any) -> None:
    with pytest.raises(ConfigInvalid, match="type 'object'") as caught:
        _raw({"type": kind})
    assert caught.value.code == "config_invalid"


def test_schema_that_is_not_a_mapping_is_rejected() -> None:
    not_a_mapping: Any = [{"type": "object"}]
    with pytest.raises(ConfigInvalid, match="JSON object"):
        _raw(not_a_mapping)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"q": {"type": "text"}}},
        {"type": "object", "required": "q"},
        {"type": "object", "properties": {"q": {"minLength": -1}}},
    ],
)
def test_invalid_json_schema_is_rejected_at_construction(schema: dict[str, Any]) -> None:
    with pytest.raises(ConfigInvalid, match="invalid JSON Schema"):
        _raw(schema)


# --- strip_titles ----------------------------------------------------------------------------------------------


def test_strip_titles_walks_every_subschema_position() -> None:
    schema = {
        "title": "Root",
        "type": "object",
        "properties": {
            "a": {"title": "A", "anyOf": [{"title": "Int", "type": "integer"}, {"type": "null"}]},
            "b": {"type": "array", "items": {"title": "Item", "type": "string"}},
            "c": {"type": "object", "additionalProperties": {"title": "Value", "type": "number"}},
        },
        "$defs": {"Thing": {"title": "Thing", "type": "object"}},
    }
    assert strip_titles(schema) == {
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "b": {"type": "array", "items": {"type": "string"}},
            "c": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "$defs": {"Thing": {"type": "object"}},
    }


def test_strip_titles_keeps_a_property_named_title_and_data_values() -> None:
    schema = {
        "type": "object",
        "properties": {"title": {"title": "Title", "type": "string", "default": "untitled"}},
        "required": ["title"],
        "examples": [{"title": "kept"}],
    }
    assert strip_titles(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string", "default": "untitled"}},
        "required": ["title"],
        "examples": [{"title": "kept"}],
    }


# --- the fields-only validator: the model's checks without making the model -------------------------------------


class Tree(BaseModel):
    label: str
    children: list["Tree"] = []


@tool
def grows(root: Tree, depth: int = 1) -> None:
    """A parameter whose type refers to itself."""


@tool
def mixed(a: int, /, b: Annotated[int, Field(gt=0)], c: str = "c", *, d: list[int] | None = None) -> None:
    """Every kind of parameter, a constraint and defaults."""


def _through_the_model(t: Tool) -> Tool:
    """``t`` validated by its model only, as every tool was before the fields-only validator."""
    model_only = Tool.from_function(t.function, name=t.name, description=t.description)
    model_only._validator._validate_fields = None  # type: ignore[attr-defined]
    return model_only


@pytest.mark.parametrize(
    ("t", "arguments"),
    [
        (mixed, {"a": "1", "b": 2}),
        (mixed, {"a": 1, "b": "3", "c": "x", "d": ["4", 5]}),
        (mixed, {"a": 1, "b": 0}),
        (mixed, {"a": "one", "b": -1, "e": 1}),
        (mixed, {}),
        (nested, {"p": {"x": "1"}, "books": [{"title": "T", "pages": "9"}]}),
        (nested, {"p": {"y": 1}, "books": [{"title": 1}]}),
        (defaults, {"required": 1, "limit": None}),
        (grows, {"root": {"label": "a", "children": [{"label": "b"}]}}),
        (grows, {"root": {"children": [{}]}, "depth": "x"}),
    ],
)
def test_the_fields_only_validator_binds_and_refuses_exactly_as_the_model(t: Tool, arguments: dict[str, Any]) -> None:
    model_only = _through_the_model(t)
    refused: InvalidArguments | None = None
    try:
        expected = model_only._validator.validate(t.name, arguments)
    except InvalidArguments as error:
        refused = error
    if refused is not None:
        assert _invalid(t, arguments).message == refused.message
        return
    bound = t._validator.validate(t.name, arguments)
    assert (bound.args, bound.kwargs) == (expected.args, expected.kwargs)
    assert [type(value) for value in bound.kwargs.values()] == [type(value) for value in expected.kwargs.values()]


async def test_a_plain_tools_arguments_are_validated_without_making_its_model() -> None:
    """The model's validator makes an instance to be read back field by field; a plain signature's arguments
    are checked by its fields' validator alone, and reach the function all the same."""

    @tool
    def pair(a: int, /, b: str, *, c: float = 0.5) -> tuple[int, str, float]:
        """A pair."""
        return (a, b, c)

    def refuse(arguments: Any) -> None:
        raise AssertionError("the model was made")

    pair._validator._validate = refuse  # type: ignore[attr-defined]
    assert await pair.bind({"a": "2", "b": "x"})() == (2, "x", 0.5)


async def test_a_parameter_whose_type_refers_to_itself_is_still_validated() -> None:
    """Such a schema is wrapped in definitions, which the fields-only validator does not take: the model does."""
    assert grows._validator._validate_fields is None  # type: ignore[attr-defined]
    assert await grows.bind({"root": {"label": "a", "children": [{"label": "b"}]}})() is None
    assert "root.children.0.label" in _invalid(grows, {"root": {"label": "a", "children": [{}]}}).message
