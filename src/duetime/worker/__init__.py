"""The worker: claim due timers, run their handlers, record the outcomes.

:class:`Worker` composes a producer (claims), an executor (runs one attempt), a fan-out (hands
events on to destinations) and a completer (writes outcomes in batches); see each module.
"""

from duetime.worker.claim_timing import CLAIM_AHEAD
from duetime.worker.completer import WRITES_IN_FLIGHT
from duetime.worker.observing import WorkerObserver, WorkerStats
from duetime.worker.producer import CLAIMS_IN_FLIGHT, PREFETCH_HORIZON
from duetime.worker.worker import Worker, new_node_id

__all__ = [
    "CLAIMS_IN_FLIGHT",
    "CLAIM_AHEAD",
    "PREFETCH_HORIZON",
    "WRITES_IN_FLIGHT",
    "Worker",
    "WorkerObserver",
    "WorkerStats",
    "new_node_id",
]
