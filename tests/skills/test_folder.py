"""Skills read from folders: the format's checks, each refusal coded ``skill_invalid`` with its reason and
the file; which folder wins a name; and a skill's files read only inside its folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.skills.helpers import write_skill
from tether.errors import ConfigInvalid, PermissionDenied, ToolError
from tether.skills import Skill, SkillInvalid, Skills
from tether.skills.folder import MAX_FILE_BYTES, MAX_LISTED, read_skill


def refusal(path: Path) -> SkillInvalid:
    with pytest.raises(SkillInvalid) as raised:
        Skills.load([path])
    assert raised.value.code == "skill_invalid"
    assert isinstance(raised.value, ConfigInvalid), "a malformed skill is a configuration problem"
    return raised.value


def test_a_skill_folder_gives_its_fields_and_a_folder_of_skills_gives_each(tmp_path: Path) -> None:
    write_skill(
        tmp_path / "all",
        "pdf-tools",
        front="name: pdf-tools\ndescription: >\n  Extract text.\n  Use for PDFs.\nlicense: MIT\ncompatibility: "
        "Needs python3\nmetadata:\n  author: me\nallowed-tools: Bash(pdftotext:*) Read\nuser-invocable: true\n",
    )
    write_skill(tmp_path / "all", "csv")
    (tmp_path / "all" / "notes").mkdir()  # a folder without SKILL.md is not a skill
    write_skill(tmp_path / "all" / ".hidden", "secret")

    both = Skills.load([tmp_path / "all"])
    one = Skills.load([tmp_path / "all" / "csv"])

    assert both.names == ["csv", "pdf-tools"]
    pdf = both["pdf-tools"]
    assert (pdf.description, pdf.license, pdf.compatibility) == ("Extract text. Use for PDFs.", "MIT", "Needs python3")
    assert dict(pdf.metadata) == {"author": "me"}
    assert pdf.allowed_tools == ("Bash(pdftotext:*)", "Read")
    assert pdf.folder == (tmp_path / "all" / "pdf-tools").resolve()
    assert one.names == ["csv"]


@pytest.mark.parametrize(
    ("front", "reason", "says"),
    [
        ("description: no name\n", "missing_field", "no name: give 'name: my-skill'"),
        ("name: my-skill\n", "missing_field", "no description"),
        ("name: my-skill\ndescription: ''\n", "missing_field", "no description"),
        ("name: My-Skill\ndescription: d\n", "bad_name", "lowercase letters"),
        ("name: my--skill\ndescription: d\n", "bad_name", "single hyphens"),
        ("name: -my-skill\ndescription: d\n", "bad_name", "neither first nor last"),
        (f"name: {'a' * 65}\ndescription: d\n", "bad_name", "1-64"),
        ("name: other\ndescription: d\n", "name_mismatch", "not the folder's, 'my-skill'"),
        (f"name: my-skill\ndescription: {'d' * 1025}\n", "bad_field", "more than 1024"),
        (f"name: my-skill\ndescription: d\ncompatibility: {'c' * 501}\n", "bad_field", "more than 500"),
        ("name: my-skill\ndescription: d\nmetadata: [a]\n", "bad_field", "metadata must be a mapping"),
        ("name: my-skill\ndescription: d\nlicense: [a]\n", "bad_field", "license must be text"),
        ("name: my-skill\ndescription: d\nx: &a b\n", "front_matter", "line 4: anchors"),
    ],
)
def test_a_malformed_skill_md_is_refused_with_its_reason_and_file(
    tmp_path: Path, front: str, reason: str, says: str
) -> None:
    folder = write_skill(tmp_path, "my-skill", front=front)

    error = refusal(folder)

    assert (error.reason, error.details["reason"]) == (reason, reason)
    assert error.details["path"] == str((folder / "SKILL.md").resolve())
    assert says in error.message


def test_a_skill_md_without_front_matter_says_what_it_must_begin_with(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "SKILL.md").write_text("# Plain\nNo front matter.\n")

    error = refusal(folder)

    assert error.reason == "no_front_matter"
    assert "must begin with a '---' line" in error.message


def test_a_path_that_is_missing_or_holds_no_skill_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()

    assert refusal(tmp_path / "nowhere").reason == "not_found"
    assert refusal(tmp_path / "empty").reason == "no_skill"
    with pytest.raises(SkillInvalid, match="a list of paths, not one path"):
        Skills.load(str(tmp_path))


def test_a_name_given_twice_by_the_paths_of_one_level_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path / "a", "greet")
    write_skill(tmp_path / "b", "greet")

    with pytest.raises(SkillInvalid) as raised:
        Skills.load([tmp_path / "a", tmp_path / "b"])

    assert raised.value.reason == "duplicate"
    assert str(tmp_path / "a" / "greet") in raised.value.message


def test_an_earlier_level_shadows_a_later_ones_skill_and_missing_later_folders_are_passed_over(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path / "explicit", "greet", "Explicit.")
    write_skill(tmp_path / "project", "greet", "Project's.")
    write_skill(tmp_path / "project", "lint", "Project's lint.")
    write_skill(tmp_path / "user", "lint", "User's lint.")
    write_skill(tmp_path / "user", "deploy", "User's deploy.")

    found = Skills.discover([tmp_path / "explicit"], [tmp_path / "project", tmp_path / "gone"], [tmp_path / "user"])

    assert [(s.name, s.description) for s in found] == [
        ("deploy", "User's deploy."),
        ("greet", "Explicit."),
        ("lint", "Project's lint."),
    ]
    assert sorted((s.name, s.description) for s in found.shadowed) == [
        ("greet", "Project's."),
        ("lint", "User's lint."),
    ]
    with pytest.raises(SkillInvalid, match="no such folder"):
        Skills.discover([tmp_path / "gone"])  # the first level's paths were named: they must exist


# --- a skill's files --------------------------------------------------------------------------------------------


@pytest.fixture
def skill(tmp_path: Path) -> Skill:
    folder = write_skill(tmp_path / "skills", "tools", body="# Tools\nRun scripts/run.sh.")
    (folder / "scripts").mkdir()
    (folder / "scripts" / "run.sh").write_text("echo run\n")
    (folder / "references").mkdir()
    (folder / "references" / "GUIDE.md").write_text("The guide.\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("hidden\n")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (tmp_path / "secret.txt").write_text("outside-secret\n")
    return read_skill(folder)


def test_the_body_is_the_file_after_its_front_matter_and_the_files_are_listed(skill: Skill) -> None:
    assert skill.body() == "# Tools\nRun scripts/run.sh."
    assert skill.files() == (["references/GUIDE.md", "scripts/run.sh"], 0)
    assert skill.read("references/GUIDE.md") == "The guide.\n"


def test_a_path_leading_outside_the_skills_folder_is_refused(skill: Skill, tmp_path: Path) -> None:
    (skill.folder / "escape").symlink_to(tmp_path / "secret.txt")
    (skill.folder / "inside").symlink_to(skill.folder / "scripts" / "run.sh")

    for path in ("../secret.txt", str(tmp_path / "secret.txt"), "escape", "scripts/../../secret.txt"):
        with pytest.raises(PermissionDenied) as raised:
            skill.read(path)
        assert "outside-secret" not in raised.value.message
    assert "symlink" in _denied(skill, "escape")
    assert "escape" not in skill.files()[0], "a symlink leading outside is not listed"
    assert skill.read("inside") == "echo run\n", "a symlink to a file of the skill is read"


def _denied(skill: Skill, path: str) -> str:
    with pytest.raises(PermissionDenied) as raised:
        skill.read(path)
    return raised.value.message


def test_a_missing_binary_huge_or_special_file_is_a_plain_error(skill: Skill) -> None:
    (skill.folder / "data.bin").write_bytes(b"\0\1\2" * 10)
    (skill.folder / "big.txt").write_text("x" * (MAX_FILE_BYTES + 1))
    os.mkfifo(skill.folder / "pipe")

    with pytest.raises(ToolError, match="does not exist"):
        skill.read("nope.md")
    with pytest.raises(ToolError, match="binary"):
        skill.read("data.bin")
    with pytest.raises(ToolError, match="too large to load"):
        skill.read("big.txt")
    with pytest.raises(ToolError, match="not a file"):
        skill.read("scripts")
    with pytest.raises(PermissionDenied, match="FIFO"):
        skill.read("pipe")  # never opened: a FIFO would wait for a writer


def test_a_long_file_list_is_cut_and_counted(skill: Skill) -> None:
    many = skill.folder / "assets"
    many.mkdir()
    for number in range(MAX_LISTED + 5):
        (many / f"{number:03}.txt").write_text("x")

    listed, more = skill.files()

    assert len(listed) == MAX_LISTED
    assert more == 7  # the fixture's two files and the 205 assets: 207, of which 200 are listed


def test_a_skill_folder_may_be_a_symlink_named_as_the_skill(tmp_path: Path) -> None:
    stored = write_skill(tmp_path / "store", "greet", body="# Greet\nSay hello.")
    stored.rename(tmp_path / "store" / "v1.2")
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "greet").symlink_to(tmp_path / "store" / "v1.2")

    (skill,) = Skills.load([tmp_path / "skills"])

    assert skill.folder == (tmp_path / "store" / "v1.2").resolve()
    assert skill.body() == "# Greet\nSay hello."


def test_a_broken_skill_found_is_skipped_with_a_warning_and_a_named_one_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_skill(tmp_path / "project", "greet", "Greets.")
    broken = write_skill(tmp_path / "project", "lint", front="name: Lint\ndescription: Lints.\n")
    write_skill(tmp_path / "user", "deploy", front="name: deploy\ndescription: [unclosed\n")

    with caplog.at_level("WARNING", logger="tether.skills"):
        found = Skills.discover([], [tmp_path / "project"], [tmp_path / "user"])

    assert found.names == ["greet"]
    assert [(e.skill_folder.name, e.reason) for e in found.broken] == [("lint", "bad_name"), ("deploy", "front_matter")]
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 2
    assert warnings[0].startswith(
        f"tether: skipped the skill {broken.resolve() / 'SKILL.md'}: skill_invalid (bad_name):"
    )
    assert "line 3" in warnings[1]
    with pytest.raises(SkillInvalid, match="lowercase letters"):
        Skills.discover([tmp_path / "project"])  # named: refused
    with pytest.raises(SkillInvalid, match="lowercase letters"):
        Skills.load([broken])
