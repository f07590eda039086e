"""The README's configuration reference is generated from the config table."""
import pathlib

from kchannel.config import reference

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


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


# One server.properties per row of the README's "Checking a configuration"
# table (keyed by the row's first cell), so the table shows what the code says.
_MISTAKES = {
    "listener not in the map": {
        "listeners": "INTERNAL://:9092"},
    "same name twice": {
        "listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"},
    "same port twice (host names or the wildcard)": {
        "listeners": "PLAINTEXT://:9092,SSL://:9092"},
    "same port twice (two IP addresses of one family, e.g. `127.0.0.1`)": {
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092"},
    "`0.0.0.0` advertised": {
        "listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
    "both inter-broker keys": {
        "inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
    "inter-broker listener not advertised": {
        "listeners": "INTERNAL://:9092,EXTERNAL://:9093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,REPLICATION:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION"},
    "unknown protocol": {
        "listeners": "PLAINTEXT://:9092",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_TLS"},
    "inter-broker SASL mechanism not enabled": {
        "listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="a" password="b" user_a="b";'},
}


def _mistakes_table():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Checking a configuration"):]
    section = section[:section.index("\n\n", section.index("| mistake |"))]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("mistake", "---"):
            rows[cells[0]] = cells[1].strip("`").strip()
    return rows


def test_readme_config_mistakes_are_what_validation_says():
    import re

    from kchannel.config import ServerConfig

    rows = _mistakes_table()
    assert set(rows) == set(_MISTAKES), "README table and this test name different mistakes"
    for mistake, message in rows.items():
        errors = [str(e) for e in ServerConfig.validate(_MISTAKES[mistake])]
        pattern = ".*".join(re.escape(part) for part in message.split("...")) + "$"
        assert any(re.match(pattern, e) for e in errors), (mistake, message, errors)
