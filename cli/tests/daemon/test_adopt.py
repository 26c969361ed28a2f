"""`keywatch run` with [[adopt]] tables and [catchup]: config errors name the table and the
key. Fixtures and helpers: conftest.py."""

from __future__ import annotations

import re

import pytest

from conftest import base_config

PRINT = "[[handler]]\nplugin = \"print\"\n"


@pytest.mark.parametrize("tables, expected", [
    ("[adopt]\nprefix = \"sess:\"\n",
     r"\.toml:1:1: \[adopt\] is a table; write \[\[adopt\]\] \(one per rule\)"),
    ("[[adopt]]\nprefx = \"sess:\"\n",
     r"\.toml:2:1: \[\[adopt\]\] #1 prefx: unknown key \(did you mean 'prefix'\?\)"),
    ("[[adopt]]\nqueue = \"sessions\"\n", r"\.toml:1:1: \[\[adopt\]\] #1: no prefix or glob"),
    ("[[adopt]]\nprefix = \"a:\"\n[[adopt]]\nprefix = \"kw:keys:\"\n",
     r"\.toml:4:10: \[\[adopt\]\] #2 prefix: .*names keys of keywatch's own namespace \"kw\""),
    ("[[adopt]]\nprefix = \"a:\"\nsnapshot = \"yes\"\n",
     r"\.toml:3:12: \[\[adopt\]\] #1 snapshot: expected a boolean"),
])
def test_adopt_config_errors_exit_2_naming_the_table_and_the_key(keywatch, redis, tables,
                                                                  expected):
    out = keywatch("run", config=base_config(redis.url, tables + PRINT))
    assert out.returncode == 2, out.stderr
    assert re.search(expected, out.stderr), out.stderr
