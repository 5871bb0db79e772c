"""Long-running ensembles and the network between them (BEHAVIOUR 18).

An ensemble shares tasks and tools (``Ensemble(shared_tasks=..., shared_tools=...)``) and
serves them from a `Transport` (``await ensemble.serve(transport)``); other ensembles call
them with `NetworkTask`, `NetworkTool` or `NetworkClient`. `Transport.websocket()` keeps
everything in this process; `Transport.redis(name, url)` (extra ``redis``) is durable and
shared by a fleet of workers (``agentensemble worker``). See docs/network.md.
"""

from agentensemble.network._consumers import NetworkClient, NetworkError, NetworkTask, NetworkTool
from agentensemble.network._delivery import DeliveryHandler, DeliveryRegistry
from agentensemble.network._queues import AgingPolicy, QueueFullError
from agentensemble.network._serving import EnsembleServer, ServerState
from agentensemble.network._spi import BadRequest, RequestQueue, ResultStore, Transport
from agentensemble.network._wire import (
    CachePolicy,
    DeliveryMethod,
    DeliverySpec,
    Priority,
    ResponseStatus,
    TraceContext,
    WorkRequest,
    WorkResponse,
)

__all__ = [
    "AgingPolicy",
    "BadRequest",
    "CachePolicy",
    "DeliveryHandler",
    "DeliveryMethod",
    "DeliveryRegistry",
    "DeliverySpec",
    "EnsembleServer",
    "NetworkClient",
    "NetworkError",
    "NetworkTask",
    "NetworkTool",
    "Priority",
    "QueueFullError",
    "RequestQueue",
    "ResponseStatus",
    "ResultStore",
    "ServerState",
    "TraceContext",
    "Transport",
    "WorkRequest",
    "WorkResponse",
]
