"""The composition root: builds the server from a Config, runs it, stops it.

Owns: wiring (launcher -> pool -> services -> gRPC servicers, interceptors,
health, reflection, metrics, the Formalizer) and the server's lifecycle.
May import every layer below it (config, pool, services, cache, edge,
security, gateway); nothing but commands/ and tests import it.

`create_server(config)` builds everything and binds (port 0 picks a free
port, for tests); `serve(config)` runs until SIGINT/SIGTERM and then shuts
down in order: health NOT_SERVING, stop accepting RPCs with a grace period
for those in flight, drain and stop the pool (graded kill of every worker).
Start-up problems the user can fix (port in use, bad TLS files, unsafe
access settings) raise `StartupError` with one line saying what to change.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import signal
import socket

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from .cache import CachedVerifier
from .config import Config
from .core import NATIVE_ACTIVE
from .edge.budget import ByteBudget
from .edge.errors import abort_with
from .edge.identity import CallerIdentity
from .edge.interceptors.auth import build_access_interceptors
from .edge.interceptors.budget import BudgetInterceptor
from .edge.prover import ProverServicer, add_prover_to_server
from .edge.reflection import enable_reflection
from .edge.verifier import VerifierServicer, add_verifier_to_server
from .errors import ModelNotConfigured
from .pool import Pool, PoolOwner
from .security.sandbox import make_sandbox_launcher
from .services.access import ProfileAccess
from .services.canary import CanaryWriter
from .services.extract import ExtractService
from .services.ports import Verifier
from .services.prover import ProverService
from .services.verify import VerifyService
from .v1 import formalizer_pb2, formalizer_pb2_grpc, prover_pb2, verifier_pb2
from .worker.launcher import Launcher
from .worker.memory import effective_memory_limit_mb

log = logging.getLogger("leanrpc.server")


class StartupError(Exception):
    """The server cannot start for a reason the user can fix; the message is one line."""


VERIFIER_SERVICE = verifier_pb2.DESCRIPTOR.services_by_name["Verifier"].full_name
PROVER_SERVICE = prover_pb2.DESCRIPTOR.services_by_name["Prover"].full_name
FORMALIZER_SERVICE = formalizer_pb2.DESCRIPTOR.services_by_name["Formalizer"].full_name


@dataclasses.dataclass
class App:
    """Everything `create_server` built, for `serve` and for tests."""

    config: Config
    server: grpc.aio.Server
    port: int
    pool: Pool
    verify: Verifier  # the verify service, wrapped by the result cache when it is on
    health: health.aio.HealthServicer
    formalize: object | None = None
    prover: ProverService | None = None
    metrics: object | None = None
    gateway: object | None = None  # leanrpc.gateway.Gateway when gateway.http_port is set
    verifier: object | None = None  # the VerifierServicer, told first on stop
    service: VerifyService | None = None  # the service itself, for tests and diagnostics
    prover_door: object | None = None  # the ProverServicer, told with it (its Expand streams)
    extract: ExtractService | None = None
    mcp: object | None = None  # leanrpc.agents.McpDoor when mcp.port is set
    budget: ByteBudget | None = None  # bytes in flight, shared by every door (issue 44)
    _health_task: asyncio.Task | None = None

    async def stop(self, grace: float | None = None) -> None:
        grace = self.config.pool.shutdown_grace_s if grace is None else grace
        await self.health.enter_graceful_shutdown()
        if self.verifier is not None:
            self.verifier.begin_shutdown(
                grace
            )  # answers every accepted snippet before the grace ends
        if self.prover_door is not None:
            self.prover_door.begin_shutdown(grace)  # and every accepted Expand pair
        if self._health_task is not None:
            self._health_task.cancel()
        if self.gateway is not None:
            await self.gateway.stop(grace)
        if self.mcp is not None:
            await self.mcp.stop(grace)
        await self.server.stop(grace)
        if self.prover is not None:
            await self.prover.close()  # eager state moves still queued; unsandboxed scratch folders
        await self.pool.close(grace)
        await self.verify.close()  # the result cache's pending writes
        if self.metrics is not None and hasattr(self.metrics, "close"):
            await self.metrics.close()
        if self.formalize is not None and hasattr(self.formalize, "close"):
            await self.formalize.close()


async def create_server(config: Config, *, launcher: Launcher | None = None) -> App:
    # Unsafe access settings refuse to start before any worker is spawned.
    access_interceptors = build_access_interceptors(config.server)  # AccessConfigError
    access = ProfileAccess(config)  # ConfigError: a trusted profile open to every caller
    _check_address_free(config.server.host, config.server.port)
    _check_address_free(config.server.host, config.server.metrics_port, "--metrics-port")
    if config.gateway.http_port:
        _check_address_free(
            config.gateway.host or config.server.host, config.gateway.http_port, "--http-port"
        )
    if config.mcp.port:
        _check_address_free(config.mcp.host or config.server.host, config.mcp.port, "--mcp-port")
    config.limits.max_worker_rss_mb = effective_memory_limit_mb(
        config.limits.max_worker_rss_mb, config.pool.workers
    )
    launcher = launcher or make_sandbox_launcher(config)
    log.info(
        "native core: %s",
        "compiled Cython" if NATIVE_ACTIVE else "pure Python (LEANRPC_NO_EXTENSIONS)",
    )
    log.info("sandbox: %s", launcher.describe())
    pool = Pool(config, launcher, canary_source=CanaryWriter())  # [canary]: pool/canary.py
    await pool.start()
    try:
        return await _serve_pool(config, pool, launcher, access_interceptors, access)
    except BaseException:
        await pool.close(0)  # a failed start leaves no worker behind
        raise


async def _serve_pool(
    config: Config,
    pool: PoolOwner,
    launcher: Launcher,
    access_interceptors: list,
    access: ProfileAccess,
) -> App:
    service = VerifyService(pool, config, access)
    # Prover, Extract, Gateway and Formalize get it as a `Verifier` (services.ports).
    verify: Verifier = CachedVerifier.from_config(service, config, sandbox=launcher.describe())
    extract = ExtractService(verify)

    interceptors = []
    metrics = None
    if config.server.metrics_port:
        from .edge.metrics import Metrics

        metrics = Metrics()
        interceptors.append(metrics.interceptor)  # first: also counts refused calls
    from .edge.interceptors.requestlog import RequestLogInterceptor

    tokens_checked = (
        bool(getattr(access_interceptors[0], "_tokens", ())) if access_interceptors else False
    )
    identity = CallerIdentity(tokens_checked=tokens_checked)  # every door names callers by it
    interceptors.append(
        RequestLogInterceptor(tokens_checked)
    )  # before auth: refused calls are logged too
    interceptors += access_interceptors
    # One byte budget for every door (issue 44): innermost, so refused callers are never charged.
    budget = ByteBudget.from_config(config)
    interceptors.append(BudgetInterceptor(budget))
    max_bytes = config.server.max_message_mb * 2**20
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", max_bytes),
            ("grpc.max_send_message_length", max_bytes),
            ("grpc.so_reuseport", 0),
            ("grpc.http2.bdp_probe", int(config.server.http2_bdp_probe)),
        ],
    )
    verifier = VerifierServicer(
        verify,
        extract,
        sandbox_description=launcher.describe(),
        native=NATIVE_ACTIVE,
        identity=identity,
    )
    add_verifier_to_server(verifier, server)
    prover = ProverService(pool, config, verify)
    extract.attach_prover(prover)  # Extract's replay check runs through the Prover
    prover_servicer = ProverServicer(prover, identity)
    add_prover_to_server(prover_servicer, server)
    formalize = _add_formalizer(config, server, verify)

    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    enable_reflection(
        (VERIFIER_SERVICE, PROVER_SERVICE, FORMALIZER_SERVICE, health.SERVICE_NAME), server
    )

    address = f"{config.server.host}:{config.server.port}"
    try:
        if config.server.tls_cert:
            port = server.add_secure_port(address, _server_credentials(config))
        else:
            port = server.add_insecure_port(address)
    except RuntimeError:  # grpc: "Failed to bind to address ..."
        port = 0
    except OSError as exc:  # unreadable TLS files
        raise StartupError(f"cannot read TLS file {exc.filename}: {exc.strerror}") from exc
    if port == 0:
        raise StartupError(
            f"cannot listen on {address}: the port is in use or the address is not on this machine "
            "(choose another with --port, or stop the other server)"
        )
    await server.start()
    app = App(
        config=config,
        server=server,
        port=port,
        pool=pool,
        verify=verify,
        service=service,
        health=health_servicer,
        formalize=formalize,
        verifier=verifier,
        prover=prover,
        prover_door=prover_servicer,
        extract=extract,
        budget=budget,
    )
    if config.server.metrics_port:
        from .edge.metrics import start_metrics

        app.metrics = start_metrics(app, config.server.metrics_port, metrics)
    if config.gateway.http_port:
        from .gateway import start_gateway

        try:
            app.gateway = await start_gateway(
                verify, config, metrics=app.metrics, budget=app.budget
            )
        except BaseException:
            await app.stop(0)
            raise
    if config.mcp.port:
        try:
            app.mcp = await start_agents_door(app)
        except BaseException:
            await app.stop(0)
            raise
    published = await _update_health(app)
    app._health_task = asyncio.create_task(_health_loop(app, published), name="leanrpc-health")
    log.info(
        "leanrpc serving on %s:%d (%s)",
        config.server.host,
        port,
        pool.identity.description if pool.identity else "no worker yet",
    )
    return app


async def start_agents_door(app: App, *, port: int | None = None):
    """The MCP door (leanrpc.agents) on the app's services; `port` overrides [mcp] port."""
    try:
        from .agents import AgentTools, start_mcp
    except ImportError as exc:  # the mcp extra is not installed
        raise StartupError(
            f"the MCP door needs the mcp extra (pip install 'leanrpc[mcp]'): {exc}"
        ) from exc

    tools = AgentTools(app.verify, app.prover, app.extract, app.config)
    return await start_mcp(tools, app.config, port=port, metrics=app.metrics, budget=app.budget)


def _check_address_free(host: str, port: int, flag: str = "--port") -> None:
    """Refuses a taken port before any worker starts (gRPC would say so only
    after the pool is up, in a C-core log line)."""
    if port == 0:
        return
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((bare, port))
    except socket.gaierror as exc:
        raise StartupError(
            f"cannot listen on {host}:{port}: unknown host ({exc.strerror})"
        ) from exc
    except OSError as exc:
        reason = (
            "the port is in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        )
        raise StartupError(
            f"cannot listen on {host}:{port}: {reason} (choose another with {flag}, or stop the other server)"
        ) from exc


def _server_credentials(config: Config) -> grpc.ServerCredentials:
    with open(config.server.tls_key, "rb") as f:
        key = f.read()
    with open(config.server.tls_cert, "rb") as f:
        cert = f.read()
    client_ca = None
    if config.server.tls_client_ca:
        with open(config.server.tls_client_ca, "rb") as f:
            client_ca = f.read()
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def _add_formalizer(config: Config, server: grpc.aio.Server, verify: Verifier):
    """Registers the Formalizer; without weights it answers NOT_SERVING."""
    try:
        from .edge.formalizer import add_formalizer_to_server
    except ImportError as exc:  # the model extra is not installed
        log.info("Formalizer disabled: %s", exc)
        formalizer_pb2_grpc.add_FormalizerServicer_to_server(
            _UnavailableFormalizer(f"model stack not installed: {exc}"), server
        )
        return _StaticStatus(False, f"model stack not installed: {exc}")
    return add_formalizer_to_server(server, config, verify)


class _StaticStatus:
    def __init__(self, serving: bool, reason: str) -> None:
        self._status = (serving, reason)

    def serving_status(self) -> tuple[bool, str]:
        return self._status


class _UnavailableFormalizer(formalizer_pb2_grpc.FormalizerServicer):
    def __init__(self, reason: str) -> None:
        self._reason = reason

    async def Formalize(self, request_iterator, context):
        await abort_with(context, ModelNotConfigured(f"Formalizer not serving: {self._reason}"))
        yield  # pragma: no cover - makes this an async generator


def _health_state(app: App) -> tuple[bool, bool]:
    """(the verifier serves, the formalizer serves): what the health service publishes."""
    formalize_ok = False
    if app.formalize is not None and hasattr(app.formalize, "serving_status"):
        formalize_ok, _reason = app.formalize.serving_status()
    return app.pool.serving, formalize_ok


async def _update_health(app: App) -> tuple[bool, bool]:
    """Publishes the health state; returns it."""
    state = verifier_ok, formalize_ok = _health_state(app)
    serving = health_pb2.HealthCheckResponse.SERVING
    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
    await app.health.set(VERIFIER_SERVICE, serving if verifier_ok else not_serving)
    await app.health.set("", serving if verifier_ok else not_serving)
    await app.health.set(PROVER_SERVICE, serving if verifier_ok else not_serving)
    await app.health.set(FORMALIZER_SERVICE, serving if formalize_ok else not_serving)
    return state


async def _health_loop(app: App, published: tuple[bool, bool]) -> None:
    """Looks every half second; publishes only a change (issue 38 item 6: each
    publication takes the health service's lock four times, on a server that is
    otherwise asleep). A graceful shutdown's NOT_SERVING is final in the health
    service itself, whatever is published after it."""
    while True:
        await asyncio.sleep(0.5)
        try:
            if _health_state(app) != published:
                published = await _update_health(app)
        except Exception:  # pragma: no cover
            log.exception("health update failed")


def _say(config: Config, event: str, text: str, **fields) -> None:
    """A status line on stdout: plain, or one JSON object with `[server] log_json`."""
    if config.server.log_json:
        import json

        text = json.dumps({"event": event, "msg": text, **fields})
    print(text, flush=True)


async def serve(config: Config) -> signal.Signals:
    """Runs until SIGINT or SIGTERM, shuts down in order, says so on stdout;
    returns the signal that stopped it (the caller's exit status follows it)."""
    app = await create_server(config)
    stop = asyncio.Event()
    received: list[signal.Signals] = []
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    _say(
        config,
        "listening",
        f"leanrpc listening on {config.server.host}:{app.port}",
        address=f"{config.server.host}:{app.port}",
    )
    if app.gateway is not None:
        url = f"http://{app.gateway.host}:{app.gateway.port}"
        _say(config, "gateway", f"Kimina REST gateway on {url}", url=url)
    if app.mcp is not None:
        _say(config, "mcp", f"MCP door on {app.mcp.url}", url=app.mcp.url)
    await stop.wait()
    log.info("shutting down (grace %.1f s)", config.pool.shutdown_grace_s)
    await app.stop()
    _say(config, "stopped", f"leanrpc stopped ({received[0].name})", signal=received[0].name)
    return received[0]
