"""Type stubs for leanrpc._native.policy (native/policy.pyx).

Same API as leanrpc.core.needles.positions (the pure twin).
"""

def positions(text: str, needles: tuple[str, ...], until: int | None = None) -> list[int]: ...
