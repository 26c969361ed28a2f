"""Engine(adopt=[...]): keys another program writes with a TTL (redis-cli here) are
adopted and delivered like tracked keys. The rules become the library's adopt.rules text;
the library decides prefix or glob and refuses what it refuses (keywatch.Error)."""

from __future__ import annotations

import pytest

import keywatch
from keywatch._convert import adopt_rules_text

NOWHERE = "redis://127.0.0.1:1"  # an engine does not connect before start()


def test_patterns_and_mappings_become_the_library_rule_text():
    # Bytes outside printable ASCII, spaces, ';', '=' and '\' reach the library escaped.
    text = adopt_rules_text(["sess:", b"a b;c=\\\x00\xff",
                             {"glob": "cache:*:v2", "queue": "cache", "snapshot": True}])
    assert text == ("pattern=sess:;pattern=a\\x20b\\x3bc\\x3d\\x5c\\x00\\xff;"
                    "glob=cache:*:v2 queue=cache snapshot=true")
    assert adopt_rules_text([]) == ""


def test_the_library_decides_prefix_or_glob_and_reads_back_its_canonical_text():
    engine = keywatch.Engine(NOWHERE, adopt=["sess:", "cache:*", b"bin:\x00"])
    try:
        assert engine.options["adopt.rules"] == (
            "prefix=sess:; glob=cache:*; prefix=bin:\\x00")
    finally:
        engine.close()


def test_a_rule_naming_keywatchs_namespace_is_refused_with_the_library_text():
    with pytest.raises(keywatch.Error, match="names keys of keywatch's own namespace \"kw\""):
        keywatch.Engine(NOWHERE, adopt=["kw:keys:"])
    with pytest.raises(keywatch.BadOptionValue, match='unknown field "prefx"'):
        keywatch.Engine(NOWHERE, adopt=[{"prefx": "sess:"}])
    with pytest.raises(keywatch.BadOptionValue, match="exactly one of prefix, glob or pattern"):
        keywatch.Engine(NOWHERE, adopt=[{"queue": "sessions"}])


def test_values_of_the_wrong_type_are_refused_before_the_library():
    with pytest.raises(keywatch.InvalidType, match="adopt must be a list of rules"):
        keywatch.Engine(NOWHERE, adopt="sess:")
    with pytest.raises(keywatch.InvalidType, match="adopt rule 2 must be a pattern"):
        keywatch.Engine(NOWHERE, adopt=["sess:", 3])
    with pytest.raises(keywatch.InvalidType, match="adopt rule 1 snapshot must be True or False"):
        keywatch.Engine(NOWHERE, adopt=[{"prefix": "s:", "snapshot": "yes"}])
    with pytest.raises(keywatch.InvalidArgument, match="adopt= or adopt_rules=, not both"):
        keywatch.Engine(NOWHERE, adopt=["s:"], adopt_rules="prefix=t:")


def test_catchup_options_map_like_every_other_option():
    engine = keywatch.Engine(NOWHERE, adopt=["s:"], catchup_rate=20000, catchup_enable=False)
    try:
        assert engine.options["catchup.rate"] == "20000"
        assert engine.options["catchup.enable"] == "false"
    finally:
        engine.close()
