"""Build: compiles the Cython core in native/ and generates the gRPC stubs.

The stubs are generated from proto/ into server/leanrpc/v1/ (gitignored), so
their absolute imports (`from leanrpc.v1 import verifier_pb2`) resolve as
package imports (grpc/grpc#29390). Set LEANRPC_DEBUG=1 for a debug build
(line tracing, bounds checks, -O0 -g, annotated HTML). No .pyx reads a debug
macro yet, so none is defined; add one with the first invariant check.
"""

import os
import pathlib
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).parent.resolve()
PROTO_ROOT = ROOT / "proto"
STUB_ROOT = ROOT / "server"
DEBUG = os.environ.get("LEANRPC_DEBUG", "") not in ("", "0")

# trie_nodes before trie: trie cimports it. The .pxd files that modules share
# live in the package (server/leanrpc/_native/), so that cimport resolves them
# by their module name and the runtime import finds the module.
NATIVE_MODULES = ["framing", "headers", "trie_nodes", "trie", "policy", "lexchars"]
# The memory watch's poll thread reads /proc and calls eventfd(2) and sysinfo(2), and the
# stdout reader thread eventfd(2) and epoll(7): Linux only (elsewhere the watch looks from the
# event loop, worker/memwatch.py, and the loop reads the REPLs' stdout, worker/stdout.py).
if sys.platform.startswith("linux"):
    NATIVE_MODULES += ["memwatch", "gather"]
# (package, module): the one lexer, the policy's rules, and the axiom plan's
# masking and declaration scan, compiled from their own Python source as
# leanrpc.<package>.<module>_c (the hot path of every snippet).
COMPILED_PYTHON = [
    ("core", "lexing"),
    ("policy", "reading"),
    ("policy", "handover"),
    ("core", "blanking"),
    ("core", "declaring"),
]


def generate_stubs() -> None:
    """Runs protoc (from grpcio-tools) over proto/leanrpc/v1/*.proto."""
    import grpc_tools
    from grpc_tools import protoc

    protos = sorted(
        str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "leanrpc" / "v1").glob("*.proto")
    )
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={STUB_ROOT}",
        f"--pyi_out={STUB_ROOT}",
        f"--grpc_python_out={STUB_ROOT}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed: " + " ".join(args))
    init = STUB_ROOT / "leanrpc" / "v1" / "__init__.py"
    init.write_text('"""Generated gRPC stubs for leanrpc.v1 (built from proto/; do not edit)."""\n')


class BuildPyWithStubs(build_py):
    def run(self):
        generate_stubs()
        super().run()


class BuildExtWithStubs(build_ext):
    # Editable installs run build_ext in place but may skip build_py.
    def run(self):
        generate_stubs()
        super().run()


def native_extensions():
    macros = []
    compile_args = ["-O0", "-g"] if DEBUG else ["-O3"]
    if DEBUG:
        macros.append(("CYTHON_TRACE", "1"))
    extensions = [
        Extension(
            f"leanrpc._native.{name}",
            [f"native/{name}.pyx"],
            define_macros=macros,
            extra_compile_args=compile_args,
        )
        for name in NATIVE_MODULES
    ]
    native = cythonize(
        extensions,
        include_path=[str(STUB_ROOT)],
        compiler_directives={
            "language_level": 3,
            "boundscheck": DEBUG,
            "wraparound": False,
            "linetrace": DEBUG,
        },
        annotate=DEBUG,
    )
    # Python modules compiled unchanged (Cython's pure-Python mode) under a
    # `_c` name beside their source; a facade picks the build (core/lexer.py,
    # policy/scan.py, core/masking.py, core/declarations.py). Python's
    # semantics stay whole: negative indices and
    # bounds checks as the interpreter has them.
    compiled = cythonize(
        [
            Extension(
                f"leanrpc.{package}.{module}_c",
                [f"server/leanrpc/{package}/{module}.py"],
                define_macros=macros,
                extra_compile_args=compile_args,
            )
            for package, module in COMPILED_PYTHON
        ],
        # A compiled module's augmenting declarations (core/lexing_c.pxd: `Lexer` a C-level
        # class) are found by the module's full name under server/.
        include_path=[str(STUB_ROOT)],
        compiler_directives={"language_level": 3, "linetrace": DEBUG},
        annotate=DEBUG,
    )
    return native + compiled


# egg_info needs the generated package to exist before any build command runs,
# so generate here as well as in the build hooks (cheap: protoc takes ~50 ms).
if (PROTO_ROOT / "leanrpc" / "v1").is_dir():
    generate_stubs()

PACKAGES = [
    "leanrpc",
    "leanrpc._native",
    "leanrpc.core",
    "leanrpc.v1",
    "leanrpc.worker",
    "leanrpc.pool",
    "leanrpc.services",
    "leanrpc.services.prover",
    "leanrpc.edge",
    "leanrpc.edge.interceptors",
    "leanrpc.gateway",
    "leanrpc.agents",
    "leanrpc.standin",
    "leanrpc.extract",
    "leanrpc.formalize",
    "leanrpc.formalize.train",
    "leanrpc.security",
    "leanrpc.repl",
    "leanrpc.commands",
    "leanrpc.ray",
    "leanrpc.cache",
    "leanrpc.config",
    "leanrpc.reference",
    "leanrpc.policy",
    "leanrpc.client",
    "leanrpc.client.rewards",
    "leanrpc.rewards",
]

setup(
    packages=PACKAGES,
    package_dir={"": "server", "leanrpc.client": "clients/python/leanrpc_client"},
    package_data={
        "leanrpc": ["py.typed"],
        "leanrpc.v1": ["*.pyi"],
        "leanrpc._native": ["*.pyi", "*.pxd"],
        "leanrpc.core": ["*.pxd"],
        "leanrpc.standin": ["data/*"],
    },
    ext_modules=native_extensions(),
    cmdclass={"build_py": BuildPyWithStubs, "build_ext": BuildExtWithStubs},
    zip_safe=False,
)
