"""fastjson dialect (spec §7) and java .properties text."""

from __future__ import annotations

import glob
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec import fastjson, java_properties
from store.errors import ConfigError, CorruptDataError
from tests.fixtures_util import fixture_dirs, fixture_id, load_dump

CONFIG_FILES = sorted(path for fixture in fixture_dirs()
                      for path in glob.glob(os.path.join(fixture, "store", "config", "*.json*")))


def _dump_texts():
    for fixture in fixture_dirs():
        for name, text in load_dump(fixture)["before"].get("configFiles", {}).items():
            yield pytest.param(text, id=f"{fixture_id(fixture)}/{name}")


@pytest.mark.parametrize("path", CONFIG_FILES,
                         ids=lambda p: f"{fixture_id(p.split(os.sep + 'store' + os.sep)[0])}/{os.path.basename(p)}")
def test_fixture_file_round_trips_byte_exact(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert fastjson.dumps(fastjson.loads(raw)).encode("utf-8") == raw


@pytest.mark.parametrize("text", list(_dump_texts()))
def test_read_dump_config_text_round_trips(text):
    assert fastjson.dumps(fastjson.loads(text)) == text


def test_spec_7_1_example():
    text = ('{\n\t"offsetTable":{\n\t\t"TopicTest@groupA":{0:250,1:248,2:251,3:249\n\t\t},\n'
            '\t\t"%RETRY%groupA@groupA":{0:0\n\t\t}\n\t}\n}')
    value = fastjson.loads(text)
    assert value == {"offsetTable": {"TopicTest@groupA": {0: 250, 1: 248, 2: 251, 3: 249},
                                     "%RETRY%groupA@groupA": {0: 0}}}
    assert fastjson.dumps(value) == text


@pytest.mark.parametrize("value, text", [
    ({}, "{}"),
    ({"offsetTable": {}}, '{\n\t"offsetTable":{}\n}'),
    ({"offsetTable": {1: 5, 2: 0, 3: 12}}, '{\n\t"offsetTable":{1:5,2:0,3:12\n\t}\n}'),
    ({"a": ["x", "y"], "b": []}, '{\n\t"a":["x","y"],\n\t"b":[]\n}'),
    ({"a": True, "b": None, "c": -7, "d": "s"}, '{\n\t"a":true,\n\t"b":null,\n\t"c":-7,\n\t"d":"s"\n}'),
    ([{"k": 1}], '[{\n\t"k":1\n}]'),
    ({0: {"k": 1}}, '{0:{\n\t\t"k":1\n\t}\n}'),
    ({-1: 2, "s": 3}, '{-1:2,\n\t"s":3\n}'),
    ("a\"b\\c\n\x01é", '"a\\"b\\\\c\\n\\u0001é"'),
])
def test_dumps_style(value, text):
    assert fastjson.dumps(value) == text
    assert fastjson.loads(text) == value


def test_loads_ordinary_json_and_quoted_keys_stay_str():
    assert fastjson.loads('{"0": 1, "x": [1.5, 2e3, false]}') == {"0": 1, "x": [1.5, 2000.0, False]}
    assert fastjson.loads(b' {  -3 : 4 } ') == {-3: 4}
    assert fastjson.loads('"\\ud83d\\ude00"') == "\U0001F600"


@pytest.mark.parametrize("text", [
    "", "{", "{a:1}", '{"a" 1}', '{"a":1,}', "[1,]", "[1 2]", '"abc', '"\\x"', '"\\u12g4"',
    "01x", "-", "1.", "1e", "tru", '{"a":1} x', "{1.5:2}", "\x00", "[" * 1000, "9" * 5000,
])
def test_loads_rejects_malformed(text):
    with pytest.raises(CorruptDataError):
        fastjson.loads(text)


def test_loads_rejects_non_utf8_bytes():
    with pytest.raises(CorruptDataError):
        fastjson.loads(b'{"a":"\xff"}')


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1.5: 1}, {True: 1}, {(1,): 2}, object()])
def test_dumps_rejects_unrepresentable(value):
    with pytest.raises((ValueError, TypeError)):
        fastjson.dumps(value)


scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text())
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8) | st.integers(min_value=-(2**40), max_value=2**40),
                      children, max_size=4),
    max_leaves=20)


@given(values)
def test_round_trip_values(value):
    text = fastjson.dumps(value)
    assert fastjson.loads(text) == value
    assert fastjson.dumps(fastjson.loads(text)) == text


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                    max_leaves=12))
def test_loads_accepts_standard_json(value):
    assert fastjson.loads(json.dumps(value)) == value
    assert fastjson.loads(json.dumps(value, indent=2)) == value


@given(st.binary(max_size=200))
def test_fuzz_bytes_value_or_corrupt(data):
    try:
        fastjson.loads(data)
    except CorruptDataError:
        pass


@given(st.text(alphabet='{}[]":,0123456789-.eEtrufalsn \t\n\\ux', max_size=80))
def test_fuzz_json_like_text_value_or_corrupt(text):
    try:
        fastjson.loads(text)
    except CorruptDataError:
        pass


# ----------------------------------------------------------------------------------- java_properties

def test_properties_load_java_rules():
    text = ("# comment\n! also comment\n  \n"
            "a=1\n"
            "b : 2\n"
            "c   3\n"
            "d=\n"
            "e\n"
            "multi=one \\\n      two \\\n three\n"
            "esc\\ key\\=x=va\\tl\\u0041\\\\\n"
            "  indented=yes\r\n"
            "crlf=1\rcr=2\n"
            "dup=first\ndup=second\n"
            "# comment ending in backslash \\\n"
            "after=ok\n"
            "tail=end\\")
    assert java_properties.load(text) == {
        "a": "1", "b": "2", "c": "3", "d": "", "e": "", "multi": "one two three",
        "esc key=x": "va\tlA\\", "indented": "yes", "crlf": "1", "cr": "2", "dup": "second",
        "after": "ok", "tail": "end"}


def test_properties_fixture_files():
    paths = [os.path.join(fixture, "store.properties") for fixture in fixture_dirs()]
    assert paths, "no fixture found"
    for path in paths:
        with open(path, encoding="utf-8") as f:
            loaded = java_properties.load(f.read())
        assert loaded["flushDiskType"] == "ASYNC_FLUSH"
        assert java_properties.load(java_properties.dump(loaded)) == loaded


def test_properties_bad_unicode_escape():
    with pytest.raises(ConfigError):
        java_properties.load("a=\\u12x4\n")


def test_properties_dump_escapes():
    text = java_properties.dump({"a b": " lead", "k#!": "x=y:z", "u": "é\U0001F600"}, comments="hi")
    assert text == ("#hi\n" "a\\ b=\\ lead\n" "k\\#\\!=x\\=y\\:z\n" "u=\\u00E9\\uD83D\\uDE00\n")


@given(st.dictionaries(st.text(min_size=1), st.text()))
def test_properties_round_trip(mapping):
    assert java_properties.load(java_properties.dump(mapping)) == mapping


@given(st.text(max_size=120))
def test_properties_fuzz_load_value_or_config_error(text):
    try:
        result = java_properties.load(text)
    except ConfigError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in result.items())
