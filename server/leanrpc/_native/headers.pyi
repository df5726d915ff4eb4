"""Type stubs for leanrpc._native.headers (native/headers.pyx, compiled from
leanrpc/core/headers_py.py unchanged)."""

import dataclasses

@dataclasses.dataclass(frozen=True, slots=True)
class HeaderSplit:
    imports: str
    import_key: str
    modules: tuple[str, ...]
    preamble: str
    preamble_key: str
    body: str
    body_start_line: int
    body_start_column: int = 0
    @property
    def padded_body(self) -> str: ...

def split_header(code: str) -> HeaderSplit: ...
