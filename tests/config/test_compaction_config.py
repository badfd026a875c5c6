"""``[compaction]`` and ``tools.cache_tool_outputs``: validated like every section, shown with their origins,
edited in place, and turned into what ``Agent`` takes."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

import pytest

from tests.config.helpers import Dirs
from tether.config.edit import init_file, set_value
from tether.config.schema import (
    CACHE_TOOL_OUTPUTS,
    MIN_CACHE_TOOL_OUTPUTS,
    MIN_CONTEXT_WINDOW,
    MIN_SUMMARY_TOKENS,
    CompactionConfig,
    Config,
)
from tether.config.show import render_json, render_toml
from tether.config.template import default_file
from tether.errors import ConfigInvalid
from tether.limits import Compaction


def only_issue(dirs: Dirs, text: str) -> dict[str, object]:
    dirs.write_project(text)
    (issue,) = dirs.issues()
    assert issue["origin"] == str(dirs.agent_toml)
    return issue


def test_the_section_has_exactly_the_fields_and_defaults_of_compaction() -> None:
    assert list(CompactionConfig.model_fields) == [field.name for field in dataclasses.fields(Compaction)]
    assert CompactionConfig().to_compaction() == Compaction()


def test_the_settings_of_the_file_become_the_agents_compaction(dirs: Dirs) -> None:
    dirs.write_project(
        "[compaction]\ncontext_window = 32000\nthreshold = 0.7\nkeep_recent = 0.2\nsummary_tokens = 1024\n"
        'trim_tool_outputs = false\ninstructions = "Keep every file name."\n'
    )

    compaction = dirs.load().config.compaction.to_compaction()

    assert compaction == Compaction(
        context_window=32000,
        threshold=0.7,
        keep_recent=0.2,
        summary_tokens=1024,
        trim_tool_outputs=False,
        instructions="Keep every file name.",
    )


def test_enabled_false_turns_compaction_off(dirs: Dirs) -> None:
    dirs.write_project("[compaction]\nenabled = false\n")

    assert dirs.load().config.compaction.to_compaction().enabled is False


def test_the_smallest_values_the_file_accepts_are_accepted_by_compaction(dirs: Dirs) -> None:
    dirs.write_project(
        f"[compaction]\ncontext_window = {MIN_CONTEXT_WINDOW}\nsummary_tokens = {MIN_SUMMARY_TOKENS}\n"
        "threshold = 0.02\nkeep_recent = 0.01\n"
    )

    compaction = dirs.load().config.compaction.to_compaction()

    assert (compaction.context_window, compaction.summary_tokens) == (MIN_CONTEXT_WINDOW, MIN_SUMMARY_TOKENS)


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        pytest.param("context_window = 100", "compaction.context_window", "whole number of tokens >= 256", id="small"),
        pytest.param('context_window = "128k"', "compaction.context_window", "whole number", id="window-text"),
        pytest.param("context_window = 4000.5", "compaction.context_window", "whole number", id="window-float"),
        pytest.param("threshold = 1.5", "compaction.threshold", "fraction between 0 and 1", id="threshold"),
        pytest.param('threshold = "0.8"', "compaction.threshold", "fraction between 0 and 1", id="threshold-text"),
        pytest.param("keep_recent = 0", "compaction.keep_recent", "fraction between 0 and 1", id="keep_recent"),
        pytest.param("summary_tokens = 8", "compaction.summary_tokens", "whole number of tokens >= 16", id="summary"),
        pytest.param('enabled = "yes"', "compaction.enabled", "must be true or false", id="enabled"),
        pytest.param('instructions = "  "', "compaction.instructions", "must say what the summary", id="blank"),
        pytest.param("trim_tool_outputs = 1", "compaction.trim_tool_outputs", "true or false", id="trim"),
    ],
)
def test_an_invalid_compaction_value_is_reported_with_its_key_and_line(
    dirs: Dirs, text: str, key: str, words: str
) -> None:
    issue = only_issue(dirs, f"# window\n[compaction]\n{text}\n")

    assert (issue["key"], issue["line"]) == (key, 3)
    assert words in str(issue["message"])


def test_an_unknown_compaction_key_is_refused_with_the_key_that_was_probably_meant(dirs: Dirs) -> None:
    issue = only_issue(dirs, "[compaction]\ntreshold = 0.7\n")

    assert (issue["key"], issue["line"]) == ("compaction.treshold", 2)
    assert str(issue["message"]).endswith("did you mean 'threshold'?")


def test_a_misspelt_section_name_suggests_compaction(dirs: Dirs) -> None:
    issue = only_issue(dirs, "[compation]\nenabled = false\n")

    assert issue["key"] == "compation"
    assert str(issue["message"]).endswith("did you mean 'compaction'?")


def test_keep_recent_at_or_above_threshold_is_blamed_on_the_key_that_was_set(dirs: Dirs) -> None:
    threshold = only_issue(dirs, "[compaction]\n\nthreshold = 0.2\n")
    assert (threshold["key"], threshold["line"]) == ("compaction.threshold", 3)
    assert "keep_recent (0.25) must be below threshold (0.2)" in str(threshold["message"])

    keep = only_issue(dirs, "[compaction]\nthreshold = 0.6\nkeep_recent = 0.6\n")
    assert (keep["key"], keep["line"]) == ("compaction.keep_recent", 3)


def test_the_window_can_come_from_a_variable_or_a_flag_and_a_bad_one_is_named_so(dirs: Dirs) -> None:
    dirs.write_project("[compaction]\ncontext_window = 8000\n")

    assert dirs.load({"TETHER_COMPACTION__CONTEXT_WINDOW": "16000"}).config.compaction.context_window == 16000
    flagged = dirs.load(flags={"compaction.context_window": 32000, "compaction.enabled": False}).config
    assert (flagged.compaction.context_window, flagged.compaction.enabled) == (32000, False)
    with pytest.raises(ConfigInvalid) as caught:
        dirs.load({"TETHER_COMPACTION__THRESHOLD": "2"})
    assert "environment variable TETHER_COMPACTION__THRESHOLD: compaction.threshold: must be a fraction" in str(
        caught.value
    )


# --- tools.cache_tool_outputs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", CACHE_TOOL_OUTPUTS),
        ("cache_tool_outputs = 20000", 20000),
        (f"cache_tool_outputs = {MIN_CACHE_TOOL_OUTPUTS}", MIN_CACHE_TOOL_OUTPUTS),
        ("cache_tool_outputs = false", None),
        ('cache_tool_outputs = "off"', None),
    ],
)
def test_cache_tool_outputs_is_a_number_of_characters_or_off(dirs: Dirs, text: str, expected: int | None) -> None:
    dirs.write_project(f"[tools]\n{text}\n")

    assert dirs.load().config.tools.cache_tool_outputs == expected


@pytest.mark.parametrize("value", ["10", "true", '"8k"', "8000.0", "0"])
def test_cache_tool_outputs_refuses_anything_else(dirs: Dirs, value: str) -> None:
    issue = only_issue(dirs, f"[tools]\nmode = 'full'\ncache_tool_outputs = {value}\n")

    assert (issue["key"], issue["line"]) == ("tools.cache_tool_outputs", 3)
    assert f"whole number of characters >= {MIN_CACHE_TOOL_OUTPUTS:,}, or false" in str(issue["message"])


# --- show, init, set ----------------------------------------------------------------------------------------


def test_show_writes_the_section_with_origins_and_loads_back_to_the_same_configuration(dirs: Dirs) -> None:
    dirs.write_project("[compaction]\nthreshold = 0.6\n\n[tools]\ncache_tool_outputs = false\n")
    loaded = dirs.load(flags={"compaction.context_window": 64000})

    text = render_toml(loaded, {})

    assert Config.model_validate(tomllib.loads(text)) == loaded.config
    lines = text.splitlines()
    assert f"threshold = 0.6 # {dirs.agent_toml} line 2" in lines
    assert "context_window = 64000 # command line (compaction.context_window)" in lines
    assert "keep_recent = 0.25 # default" in lines
    assert f'cache_tool_outputs = "off" # {dirs.agent_toml} line 5' in lines
    assert not any(line.startswith(("summary_tokens", "instructions")) for line in lines), "not set: left out"


def test_show_json_has_null_for_what_is_not_set_and_loads_back(dirs: Dirs) -> None:
    dirs.write_project("[tools]\ncache_tool_outputs = false\n")

    data = json.loads(render_json(dirs.load(), {}))

    assert data["compaction"]["context_window"] is None
    assert data["tools"]["cache_tool_outputs"] is None
    assert Config.model_validate({**data, "runtime": {}}) == dirs.load().config


def test_init_documents_the_section_and_the_cache_and_still_loads_to_the_defaults(dirs: Dirs) -> None:
    text = default_file()
    init_file(dirs.agent_toml)

    assert dirs.load().config == Config()
    section = text[text.index("\n[compaction]\n") : text.index("\n[providers]\n")]
    for name in CompactionConfig.model_fields:
        assert f"\n# {name} = " in section, name
    assert "\n# threshold = 0.8\n" in section
    assert "\n# cache_tool_outputs = 8000\n" in text[text.index("\n[tools]\n") :]


def test_set_after_init_puts_compaction_keys_in_their_section_and_refuses_bad_ones(dirs: Dirs) -> None:
    init_file(dirs.agent_toml)

    set_value(dirs.agent_toml, "compaction.context_window", "200000")
    set_value(dirs.agent_toml, "tools.cache_tool_outputs", "false")

    lines = dirs.agent_toml.read_text().splitlines()
    assert lines.index("[compaction]") < lines.index("context_window = 200000") < lines.index("[providers]")
    assert lines.index("[tools]") < lines.index("cache_tool_outputs = false") < lines.index("[tools.bash]")
    config = dirs.load().config
    assert (config.compaction.context_window, config.tools.cache_tool_outputs) == (200000, None)
    before = dirs.agent_toml.read_text()
    with pytest.raises(ConfigInvalid, match=r"compaction\.keep_recent"):
        set_value(dirs.agent_toml, "compaction.keep_recent", "0.9")
    assert dirs.agent_toml.read_text() == before


def test_the_example_in_the_configuration_guide_loads_to_what_it_says(dirs: Dirs) -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    section = guide[guide.index("\n## Compaction\n") :]
    example = section[section.index("```toml\n") + len("```toml\n") : section.index("\n```\n")]
    dirs.write_project(example + "\n")

    compaction = dirs.load().config.compaction.to_compaction()

    assert (compaction.context_window, compaction.threshold, compaction.keep_recent) == (32768, 0.8, 0.25)
    assert compaction.summary_tokens == 2048
    assert "file path" in str(compaction.instructions)
