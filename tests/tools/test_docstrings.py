"""Docstring parsing: the tool description and per-parameter descriptions, in Google, NumPy and Sphinx style."""

from tether.tools.base import Tool
from tether.tools.docstrings import Docstring, parse_docstring

# --- no docstring, summary only ------------------------------------------------------------------------------


def test_missing_docstring_gives_empty_description_and_no_params() -> None:
    assert parse_docstring(None) == Docstring(description="", params={})


def test_blank_docstring_gives_empty_description_and_no_params() -> None:
    assert parse_docstring("   \n\n  ") == Docstring(description="", params={})


def test_summary_only_docstring_is_the_whole_description() -> None:
    assert parse_docstring("Add two integers.") == Docstring(description="Add two integers.", params={})


def test_multi_paragraph_description_is_kept_and_dedented() -> None:
    doc = """Add two integers.

        Works for negative numbers too.
        """
    assert parse_docstring(doc).description == "Add two integers.\n\nWorks for negative numbers too."


# --- Google ----------------------------------------------------------------------------------------------------

GOOGLE = """Add two integers.

    Longer explanation of the addition.

    Args:
        a: The first number.
        b (int): The second number,
            which may be negative.
        c (:obj:`list` of :obj:`str`, optional): A typed entry with colons in the type.

    Returns:
        The sum.

    Raises:
        ValueError: When the sum overflows.

    Examples:
        >>> add(1, 2)
        3
    """


def test_google_description_stops_at_the_first_section() -> None:
    assert parse_docstring(GOOGLE).description == "Add two integers.\n\nLonger explanation of the addition."


def test_google_returns_raises_and_examples_are_not_in_the_description() -> None:
    description = parse_docstring(GOOGLE).description
    assert "sum." not in description
    assert "ValueError" not in description
    assert ">>>" not in description


def test_google_plain_entry_gives_its_description() -> None:
    assert parse_docstring(GOOGLE).params["a"] == "The first number."


def test_google_type_annotation_is_dropped_and_continuation_lines_are_joined() -> None:
    assert parse_docstring(GOOGLE).params["b"] == "The second number, which may be negative."


def test_google_type_annotation_containing_colons_is_dropped() -> None:
    assert parse_docstring(GOOGLE).params["c"] == "A typed entry with colons in the type."


def test_google_other_sections_add_no_params() -> None:
    assert set(parse_docstring(GOOGLE).params) == {"a", "b", "c"}


def test_google_entry_whose_description_starts_on_the_next_line() -> None:
    doc = """Summary.

    Args:
        path:
            Where the file is,
            relative to the workspace.
    """
    assert parse_docstring(doc).params == {"path": "Where the file is, relative to the workspace."}


def test_google_keyword_args_section_is_a_parameter_section() -> None:
    doc = """Summary.

    Keyword Args:
        limit: How many to return.
    """
    assert parse_docstring(doc).params == {"limit": "How many to return."}


def test_google_star_args_and_kwargs_are_named_without_stars() -> None:
    doc = """Summary.

    Args:
        *args: Positional extras.
        **kwargs: Keyword extras.
    """
    assert parse_docstring(doc).params == {"args": "Positional extras.", "kwargs": "Keyword extras."}


def test_google_type_with_nested_parentheses_is_its_own_entry() -> None:
    doc = """Summary.

    Args:
        name: The name.
        pair (tuple(int, int)): Two coordinates.
    """
    assert parse_docstring(doc).params == {"name": "The name.", "pair": "Two coordinates."}


# --- NumPy -----------------------------------------------------------------------------------------------------

NUMPY = """Add two integers.

    Parameters
    ----------
    a : int
        The first number.
    b : int, optional
        The second number,
        which may be negative.
    flag
        An entry without a type.
    *args : int
        Positional extras.
    **kwargs
        Keyword extras.

    Returns
    -------
    int
        The sum.

    Examples
    --------
    >>> add(1, 2)
    3
    """


def test_numpy_description_stops_at_the_first_section() -> None:
    assert parse_docstring(NUMPY).description == "Add two integers."


def test_numpy_name_colon_type_entry_gives_its_description() -> None:
    assert parse_docstring(NUMPY).params["a"] == "The first number."


def test_numpy_multi_line_description_is_joined() -> None:
    assert parse_docstring(NUMPY).params["b"] == "The second number, which may be negative."


def test_numpy_entry_without_type_gives_its_description() -> None:
    assert parse_docstring(NUMPY).params["flag"] == "An entry without a type."


def test_numpy_star_args_and_kwargs_are_named_without_stars() -> None:
    params = parse_docstring(NUMPY).params
    assert params["args"] == "Positional extras."
    assert params["kwargs"] == "Keyword extras."


def test_numpy_returns_and_examples_add_no_params() -> None:
    assert set(parse_docstring(NUMPY).params) == {"a", "b", "flag", "args", "kwargs"}


def test_numpy_combined_names_do_not_leak_into_the_previous_entry() -> None:
    # numpydoc allows "x1, x2 : type" for parameters that share a type and a description.
    doc = """Summary.

    Parameters
    ----------
    scale : float
        The scale.
    x, y : float
        The coordinates.
    """
    params = parse_docstring(doc).params
    assert params["scale"] == "The scale."
    assert params.get("x") == "The coordinates."
    assert params.get("y") == "The coordinates."


# --- Sphinx ----------------------------------------------------------------------------------------------------

SPHINX = """Add two integers.

    Longer explanation.

    :param a: The first number.
    :type a: int
    :param int b: The second number,
        which may be negative.
    :param c:
        Described on the next line.
    :param *args: Positional extras.
    :param **kwargs: Keyword extras.
    :raises ValueError: When the sum overflows.
    :returns: The sum.
    :rtype: int
    """


def test_sphinx_description_stops_at_the_first_field() -> None:
    assert parse_docstring(SPHINX).description == "Add two integers.\n\nLonger explanation."


def test_sphinx_param_gives_its_description() -> None:
    assert parse_docstring(SPHINX).params["a"] == "The first number."


def test_sphinx_typed_param_and_continuation_lines() -> None:
    assert parse_docstring(SPHINX).params["b"] == "The second number, which may be negative."


def test_sphinx_description_on_the_next_line() -> None:
    assert parse_docstring(SPHINX).params["c"] == "Described on the next line."


def test_sphinx_star_args_and_kwargs_are_named_without_stars() -> None:
    params = parse_docstring(SPHINX).params
    assert params["args"] == "Positional extras."
    assert params["kwargs"] == "Keyword extras."


def test_sphinx_type_raises_and_returns_fields_add_no_params() -> None:
    assert set(parse_docstring(SPHINX).params) == {"a", "b", "c", "args", "kwargs"}


def test_sphinx_returns_is_not_in_the_description() -> None:
    description = parse_docstring(SPHINX).description
    assert "The sum" not in description
    assert "ValueError" not in description


def test_sphinx_param_description_may_contain_colons() -> None:
    doc = """Fetch a page.

    :param url: The address, e.g. https://example.com: with a port.
    """
    assert parse_docstring(doc).params == {"url": "The address, e.g. https://example.com: with a port."}


def test_a_docstring_that_opens_with_its_arguments_section_keeps_their_descriptions() -> None:
    def tool_like(path: str) -> str:
        """Args:
        path: The file.
        """
        return path

    assert parse_docstring(tool_like.__doc__).params == {"path": "The file."}
    assert parse_docstring("Args:\n    path: The file.").params == {"path": "The file."}
    assert Tool.from_function(tool_like).parameters["properties"]["path"]["description"] == "The file."
