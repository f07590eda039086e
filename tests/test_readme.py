"""The README's configuration reference is generated from the config table."""
import pathlib

from kchannel.config import reference

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_config_reference_matches_the_config_table():
    section = reference.readme_section(README.read_text(encoding="utf-8"))
    assert section is not None, "README lacks the config-reference markers"
    assert section == reference.render(), (
        "README configuration reference is stale: regenerate it with "
        "`python -m kchannel.config.reference`")


def test_every_config_key_is_documented_once():
    section = reference.render()
    for key in reference.TABLE:
        assert f"`{key.name}`" in section
