"""leanrpc: a gRPC service between machine-learning systems and Lean 4.

Layers, each importing only from the ones before it:

    core (native framing, header split, prefix trie)
      -> worker (one REPL process, its state machine, launchers)
        -> pool (routing, header LRU, supervision)
          -> services (verify, extract, formalize; internal types only)
            -> edge (gRPC servicers, interceptors, server factory)
"""

__version__ = "0.1.0"
