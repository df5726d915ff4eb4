"""FrameDecoder, decode_frame and encode_request, on both implementations.

The expected frames of a transcript come from `reference_objects`, which
reads one JSON value after another with raw_decode and knows nothing about
blank lines.
"""

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leanrpc.errors import (
    FrameDecodeError,
    FrameTooLarge,
    FramingError,
    InternalError,
    RequestError,
)
from native_support import both, reference_objects, transcripts

pytestmark = pytest.mark.timeout(120)


def feed_all(decoder, data: bytes, cuts) -> list[bytes]:
    frames = []
    last = 0
    for cut in sorted(set(cuts)):
        frames += decoder.feed(data[last:cut])
        last = cut
    frames += decoder.feed(data[last:])
    return frames


def random_cuts(rng: random.Random, size: int, mean_chunk: int) -> list[int]:
    cuts = []
    pos = 0
    while True:
        pos += rng.randint(1, 2 * mean_chunk)
        if pos >= size:
            return cuts
        cuts.append(pos)


def decode_all(framing, frames):
    return [framing.decode_frame(frame) for frame in frames]


# -- the recorded REPL transcripts -------------------------------------------------


def test_transcripts_are_present():
    assert len(transcripts()) >= 300


def test_transcripts_whole(framing):
    for path in transcripts():
        data = path.read_bytes()
        decoder = framing.FrameDecoder()
        frames = decoder.feed(data)
        assert decode_all(framing, frames) == reference_objects(data), path
        assert decoder.buffered == 0, path
        assert all(not frame[:1].isspace() and not frame[-1:].isspace() for frame in frames)


def test_transcripts_byte_by_byte(framing):
    for path in transcripts():
        data = path.read_bytes()
        decoder = framing.FrameDecoder()
        frames = []
        for i in range(len(data)):
            frames += decoder.feed(data[i : i + 1])
        assert decode_all(framing, frames) == reference_objects(data), path
        assert decoder.buffered == 0


def test_transcripts_random_chunks(framing):
    rng = random.Random(20240601)
    for path in transcripts():
        data = path.read_bytes()
        expected = reference_objects(data)
        for mean in (3, 40, 700):
            decoder = framing.FrameDecoder()
            frames = feed_all(decoder, data, random_cuts(rng, len(data), mean))
            assert decode_all(framing, frames) == expected, (path, mean)


def test_transcripts_as_one_stream_with_crlf_and_stray_blank_lines(framing):
    rng = random.Random(7)
    parts = []
    expected = []
    for path in transcripts():
        data = path.read_bytes()
        expected += reference_objects(data)
        if rng.random() < 0.5:
            data = data.replace(b"\n", b"\r\n")
        parts.append(data)
        # Extra blank or whitespace-only lines between responses are skipped.
        parts.append(rng.choice([b"", b"\n", b"\r\n", b" \t\n", b"\n\n\n"]))
    stream = b"".join(parts)
    for mean in (1, 64, 65536):
        decoder = framing.FrameDecoder()
        frames = feed_all(decoder, stream, random_cuts(rng, len(stream), mean))
        assert decode_all(framing, frames) == expected
        assert decoder.buffered == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=0, max_value=400_000), max_size=200))
def test_transcript_stream_any_chunking(cuts):
    stream = _joined_transcripts()
    expected = _joined_expected()
    for framing in both("framing"):
        decoder = framing.FrameDecoder()
        frames = feed_all(decoder, stream, [c for c in cuts if c < len(stream)])
        assert decode_all(framing, frames) == expected


_cache = {}


def _joined_transcripts() -> bytes:
    if "stream" not in _cache:
        _cache["stream"] = b"".join(path.read_bytes() for path in transcripts())
    return _cache["stream"]


def _joined_expected() -> list:
    if "expected" not in _cache:
        _cache["expected"] = reference_objects(_joined_transcripts())
    return _cache["expected"]


# -- synthetic streams -----------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_objects = st.dictionaries(st.text(max_size=8), _json_values, max_size=5)
_separators = st.sampled_from(
    ["\n\n", "\r\n\r\n", "\n \n", "\n\t\r\n", "\n\n\n", " \n\n", "\n\r\n\n"]
)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(st.tuples(_objects, st.booleans(), _separators), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
)
def test_synthetic_streams(items, cuts):
    parts = []
    for obj, pretty, separator in items:
        text = json.dumps(obj, indent=1 if pretty else None, ensure_ascii=False)
        if "\r" in separator:
            text = text.replace("\n", "\r\n")
        parts.append(text + separator)
    stream = "".join(parts).encode("utf-8")
    expected = [obj for obj, _, _ in items]
    for framing in both("framing"):
        whole = framing.FrameDecoder().feed(stream)
        chunked = feed_all(framing.FrameDecoder(), stream, [c for c in cuts if c < len(stream)])
        assert whole == chunked
        assert decode_all(framing, whole) == expected


def test_frames_are_stripped_bytes(framing):
    decoder = framing.FrameDecoder()
    frames = decoder.feed(b'  {"a": 1}  \r\n\r\n\n\n\t\n{"b":\n [2]}\n\n')
    assert frames == [b'{"a": 1}', b'{"b":\n [2]}']
    assert all(type(frame) is bytes for frame in frames)


def test_buffered_and_reset(framing):
    decoder = framing.FrameDecoder()
    assert decoder.buffered == 0
    assert decoder.feed(b'{"env": 0}\n') == []
    assert decoder.buffered == len(b'{"env": 0}\n')
    assert decoder.feed(b"\n") == [b'{"env": 0}']
    assert decoder.buffered == 0
    assert decoder.feed(b"\n\n  \n") == []
    assert decoder.buffered == 0  # whitespace before a frame is not held
    decoder.feed(b'{"half":')
    decoder.reset()
    assert decoder.buffered == 0
    assert decoder.feed(b'{"env": 1}\n\n') == [b'{"env": 1}']


def test_accepts_bytearray_and_memoryview(framing):
    decoder = framing.FrameDecoder()
    assert decoder.feed(bytearray(b'{"a": 1}\n')) == []
    assert decoder.feed(memoryview(b'\n{"b": 2}\n\n')) == [b'{"a": 1}', b'{"b": 2}']


def test_feed_rejects_str(framing):
    with pytest.raises(TypeError):
        framing.FrameDecoder().feed('{"a": 1}\n\n')


def test_a_frame_is_not_ended_by_a_single_newline(framing):
    decoder = framing.FrameDecoder()
    assert decoder.feed(b'{"messages":\n [{"severity": "error"}],\n "env": 0}\n') == []
    assert decoder.feed(b"\n") == [b'{"messages":\n [{"severity": "error"}],\n "env": 0}']


# -- limits ------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_frame_at_the_limit_passes_and_one_byte_more_raises(framing, chunk):
    limit = 1000
    body = b'{"data": "' + b"x" * (limit - 12) + b'"}'
    assert len(body) == limit
    decoder = framing.FrameDecoder(max_frame=limit)
    stream = b"\n" + body + b"  \n\n"
    assert feed_all(decoder, stream, range(chunk, len(stream), chunk)) == [body]
    big = b'{"data": "' + b"x" * (limit - 11) + b'"}'
    decoder = framing.FrameDecoder(max_frame=limit)
    stream = big + b"\n\n"
    with pytest.raises(FrameTooLarge):
        feed_all(decoder, stream, range(chunk, len(stream), chunk))


def test_pending_frame_over_the_limit_raises_before_it_ends(framing):
    decoder = framing.FrameDecoder(max_frame=1 << 16)
    decoder.feed(b'{"infotree": [')
    with pytest.raises(FrameTooLarge):
        for _ in range(100):
            decoder.feed(b'{"node": "' + b"y" * 4096 + b'"},\n')
    # Unusable until reset.
    with pytest.raises(FramingError):
        decoder.feed(b'{"env": 0}\n\n')
    decoder.reset()
    assert decoder.feed(b'{"env": 0}\n\n') == [b'{"env": 0}']


def test_whitespace_flood_raises(framing):
    decoder = framing.FrameDecoder(max_frame=100)
    decoder.feed(b'{"a":')
    with pytest.raises(FrameTooLarge):
        for _ in range(100):
            decoder.feed(b" " * 10)


def test_frame_too_large_is_a_framing_error():
    assert issubclass(FrameTooLarge, FramingError)
    assert issubclass(FrameDecodeError, FramingError)


def test_max_frame_must_be_positive(framing):
    with pytest.raises(ValueError):
        framing.FrameDecoder(max_frame=0)
    assert framing.FrameDecoder().max_frame == 64 * 2**20


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.binary(max_size=300), max_size=20))
def test_random_bytes_never_hang_and_only_raise_named_errors(chunks):
    outcomes = []
    for framing in both("framing"):
        decoder = framing.FrameDecoder(max_frame=512)
        frames = []
        error = None
        try:
            for chunk in chunks:
                frames += decoder.feed(chunk)
        except FrameTooLarge:
            error = FrameTooLarge
        decoded = []
        for frame in frames:
            # The decoder strips the REPL's whitespace (space, tab, CR, LF);
            # other bytes that bytes.isspace() accepts (\x0b, \x0c) are data.
            assert frame and frame[:1] not in b" \t\r\n" and frame[-1:] not in b" \t\r\n"
            assert len(frame) <= 512
            try:
                decoded.append(framing.decode_frame(frame))
            except FrameDecodeError:
                decoded.append(FrameDecodeError)
        outcomes.append((frames, error, decoded, decoder.buffered if error is None else None))
    assert outcomes[0] == outcomes[1]


# -- decode_frame ----------------------------------------------------------------


@pytest.mark.parametrize(
    "frame, words",
    [
        (b'{"env": \xff0}', "not valid UTF-8"),
        (b'{"data": "\xed\xa0\x80"}', "not valid UTF-8"),  # an encoded surrogate
        (b'{"env": 0', "not valid JSON"),
        (b'{"messages": [{"severity": "error"', "not valid JSON"),
        (b"", "not valid JSON"),
        (b"   ", "not valid JSON"),
        (b'{"env": 0} {"env": 1}', "not valid JSON"),
        (b'{"env": 0}}', "not valid JSON"),
        (b"\xef\xbb\xbf{}", "not valid JSON"),
        (b"[1, 2]", "JSON list, not an object"),
        (b'"text"', "JSON str, not an object"),
        (b"3", "JSON int, not an object"),
        (b"null", "JSON NoneType, not an object"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested too deeply"),
    ],
)
def test_decode_frame_errors(framing, frame, words):
    with pytest.raises(FrameDecodeError) as caught:
        framing.decode_frame(frame)
    assert words in str(caught.value)


def test_decode_frame_error_messages_match():
    python, native = both("framing")
    for frame in (b'{"env": 0', b"[1]", b'{"a": \xc3(}', b"  {} x", b'{"a": NaX}'):
        with pytest.raises(FrameDecodeError) as from_python:
            python.decode_frame(frame)
        with pytest.raises(FrameDecodeError) as from_native:
            native.decode_frame(frame)
        assert str(from_python.value) == str(from_native.value)


def test_decode_frame_values(framing):
    assert framing.decode_frame(b'{"env": 0}') == {"env": 0}
    assert framing.decode_frame(b' \r\n{"goal": "\xe2\x8a\xa2 \\u0009 x"} \n') == {"goal": "⊢ \t x"}
    assert framing.decode_frame(bytearray(b"{}")) == {}
    assert framing.decode_frame(memoryview(b'{"a": [1, {"b": null}]}')) == {"a": [1, {"b": None}]}


@settings(max_examples=300, deadline=None)
@given(
    frame=st.binary(max_size=200)
    | st.text(max_size=60).map(lambda s: s.encode("utf-8", "surrogatepass"))
)
def test_decode_frame_random_input(frame):
    results = []
    for framing in both("framing"):
        try:
            results.append(framing.decode_frame(frame))
        except FrameDecodeError as exc:
            results.append(str(exc))
    assert results[0] == results[1]


# -- encode_request ---------------------------------------------------------------


def test_encode_request_shape(framing):
    request = {"cmd": "theorem t : 1 = 1 := by\n  rfl\r\n\t⊢ 𝓝", "env": 3, "allTactics": True}
    data = framing.encode_request(request)
    assert data.endswith(b"}\n\n")
    assert data.count(b"\n") == 2
    assert (
        data
        == json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"
    )
    assert "⊢ 𝓝".encode() in data  # raw UTF-8, no \\u escapes
    assert json.loads(data) == request


@settings(max_examples=300, deadline=None)
@given(obj=_objects)
def test_encode_request_round_trips(obj):
    for framing in both("framing"):
        data = framing.encode_request(obj)
        assert data.count(b"\n") == 2 and data.endswith(b"\n\n")
        assert framing.decode_frame(data) == obj
        assert framing.FrameDecoder().feed(data) == [data[:-2]]


@pytest.mark.parametrize(
    "request_obj",
    [
        {"cmd": "bad \ud800 surrogate"},
        {"cmd": float("nan")},
        {"cmd": float("inf")},
        {"cmd": object()},
        {"cmd": b"bytes"},
        ["not", "a", "dict"],
        "text",
        None,
    ],
)
def test_encode_request_rejects(framing, request_obj):
    with pytest.raises(RequestError):
        framing.encode_request(request_obj)


def test_encode_request_rejects_cycles(framing):
    cyclic = {"cmd": "x"}
    cyclic["self"] = cyclic
    with pytest.raises(RequestError):
        framing.encode_request(cyclic)


def test_request_error_is_value_error():
    assert issubclass(RequestError, ValueError)
    assert not issubclass(RequestError, InternalError)
