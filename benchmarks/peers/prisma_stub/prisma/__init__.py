"""Stub of the `prisma` client for running kimina-ast-server offline.

kimina-ast-server imports `prisma.Prisma` at start-up and, when the client was never generated,
runs `prisma generate`, which downloads engine binaries from binaries.prisma.sh (not reachable
here). Its database is optional and only used when LEAN_SERVER_DATABASE_URL is set, which the
benchmark never sets, so no method below is called on the request path. The bench puts this
folder first on PYTHONPATH of the Kimina process only.
"""


class Prisma:
    async def connect(self) -> None:
        raise RuntimeError("the benchmark runs kimina-ast-server without a database")

    async def disconnect(self) -> None:
        return None
