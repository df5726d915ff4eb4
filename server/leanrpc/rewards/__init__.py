"""`leanrpc.rewards`: the client's reward adapters under the server package's name.

The implementation lives in the client distribution (leanrpc.client.rewards, also
shipped alone as `leanrpc_client.rewards`), so a trainer installs only the client;
this room re-exports it. docs/REWARDS.md. May import: leanrpc.client.rewards.
"""

from leanrpc.client.rewards import *  # noqa: F403
from leanrpc.client.rewards import __all__  # noqa: F401
