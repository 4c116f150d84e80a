"""Which failures a task retries: transient ones only (a busy warehouse, a timeout, a dropped connection,
a Delta commit conflict on shared storage). A missing source, a bad config or bad input fails at once,
with its own message, instead of three times."""

from __future__ import annotations

import errno

from deltalake.exceptions import CommitFailedError

from perfledger.warehouse.lock import WarehouseBusy

TRANSIENT_TYPES = (TimeoutError, ConnectionError, BlockingIOError, InterruptedError, WarehouseBusy, CommitFailedError)
TRANSIENT_ERRNOS = {errno.EAGAIN, errno.EBUSY, errno.ETIMEDOUT, errno.EINTR, errno.ECONNRESET, errno.ECONNREFUSED,
                    errno.EPIPE, errno.ESTALE}


def is_transient(exc: BaseException | None) -> bool:
    """True when `exc`, or an error it was raised from, is worth another try."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, TRANSIENT_TYPES):
            return True
        if isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def retry_transient(task, task_run, state) -> bool:
    """Prefect's retry_condition_fn: retry the failed run only when its exception is transient."""
    try:
        state.result()
    except Exception as exc:  # the task's own exception, re-raised by the state
        return is_transient(exc)
    return False


RETRY_TRANSIENT = {"retries": 2, "retry_delay_seconds": 1, "retry_condition_fn": retry_transient}
