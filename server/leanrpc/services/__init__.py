"""Services: the operations (Verify, sessions, Extract, Formalize) on internal types.

Owns: request checks, building jobs, turning pool outcomes into results
(outcomes.py). May import: config, core, errors, results, pool, extract,
formalize. Never imports edge or any `*_pb2`; the edge converts.
"""
