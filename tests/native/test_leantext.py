"""The shared Lean scanner: nested block comments and string literals."""

from hypothesis import given
from hypothesis import strategies as st

from leanrpc.core.leantext import block_comment_end, find_block_comment_end, string_literal_end


def test_block_comment_nests():
    text = "/- a /- b -/ c -/ after"
    assert text[block_comment_end(text, 0) :] == " after"


def test_unterminated_block_comment_runs_to_end():
    text = "/- a /- b -/ c"
    assert block_comment_end(text, 0) == len(text)


def test_string_escapes_skip_the_quote():
    text = r'"a \" b" rest'
    assert text[string_literal_end(text, 0) :] == " rest"


def test_unterminated_string_runs_to_end():
    assert string_literal_end('"abc\\', 0) == 5


@given(st.text(alphabet='ab/-\\" \n', max_size=40))
def test_ends_are_inside_the_text(body):
    comment = "/-" + body
    string = '"' + body
    assert 2 <= block_comment_end(comment, 0) <= len(comment)
    assert 1 <= string_literal_end(string, 0) <= len(string)


def test_find_tells_an_unclosed_comment_apart():
    assert find_block_comment_end("/- a -/", 0) == 7
    assert find_block_comment_end("/- /- -/", 0) == -1  # ends in -/ yet still open
    assert block_comment_end("/- /- -/", 0) == 8


def test_string_reads_on_past_an_invalid_escape_as_before():
    # `\q` is Lean's error; the readers that skip strings read past it.
    text = r'"a \q b" rest'
    assert text[string_literal_end(text, 0) :] == " rest"


def test_a_comment_opener_inside_a_string_is_not_a_comment():
    text = '"/- not a comment" rest'
    assert text[string_literal_end(text, 0) :] == " rest"
