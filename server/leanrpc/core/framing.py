"""REPL stdout framing and request encoding (facade).

`FrameDecoder` cuts the REPL's stdout into frames, `decode_frame` parses one,
`encode_request` writes one request. Loads leanrpc._native.framing, or the
pure twin leanrpc.core.framing_py under LEANRPC_NO_EXTENSIONS=1.
"""

from ._impl import extensions_disabled

if extensions_disabled():
    from .framing_py import DEFAULT_MAX_FRAME, FrameDecoder, decode_frame, encode_request

    IMPLEMENTATION = "python"
else:
    from .._native.framing import DEFAULT_MAX_FRAME, FrameDecoder, decode_frame, encode_request

    IMPLEMENTATION = "native"

__all__ = ["DEFAULT_MAX_FRAME", "IMPLEMENTATION", "FrameDecoder", "decode_frame", "encode_request"]
