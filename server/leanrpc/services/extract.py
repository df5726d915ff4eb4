"""Extract: verify with an infotree, then cut the proof into tactic steps.

Owns: nothing but the composition. May import: results, extract,
services.verify.
"""

from __future__ import annotations

from ..results import VerifyResult
from .verify import VerifyOptions, VerifyService


class ExtractService:
    def __init__(self, verify: VerifyService) -> None:
        self.verify_service = verify

    async def extract(self, code: str, options: VerifyOptions, *, deadline: float | None = None):
        """Returns (VerifyResult, list of leanrpc.extract.ExtractedDeclaration)."""
        from ..extract import extract_declarations

        if options.infotree is None:
            options.infotree = "original"
        result: VerifyResult = await self.verify_service.verify("extract", code, options, deadline=deadline)
        declarations = []
        if result.infotree is not None:
            infotree = result.infotree
            # Positions are already in the user's text: the body was sent
            # padded to its line in the file.
            declarations = extract_declarations(infotree, code)
        return result, declarations
