"""Surface blocks and AIS grid points as tasks of a Dask cluster (``dask.distributed``).

The pool has the interface of ``blocks.ThreadPool``: the calling process plans
the blocks, keeps the warm-start sites and assembles the result, and each ready block
goes to the cluster as one task — a pure function of its arguments, so a task whose
worker dies is simply run again on another worker by Dask's scheduler. What every task
of a run shares (model, data, settings) is scattered to the workers once.
"""
from __future__ import annotations

__all__ = ["DaskPool"]


def _identity(value):
    return value


def _named(fn, *args):
    from distributed import get_worker
    return get_worker().address, fn(*args)


class DaskPool:
    """Tasks on the workers of a ``distributed.Client``; at most one per worker thread
    in flight (so a cancel stops everything not started)."""

    def __init__(self, client):
        self.client = client
        threads = client.nthreads()
        if not threads:
            raise ValueError(f"the Dask cluster at {client.scheduler.address} has no workers")
        self.slots = sum(threads.values())
        self._workers: set[str] = set()

    def share(self, value):
        """``value`` as a task's result (not scattered data): a lost copy is recomputed."""
        return self.client.submit(_identity, value, pure=False)

    def submit(self, fn, *args):
        return self.client.submit(_named, fn, *args, pure=False)

    def result(self, future):
        worker, value = future.result()
        self._workers.add(worker)
        return value

    @staticmethod
    def wait_first(futures, timeout=None):
        """The futures done within ``timeout`` seconds (empty if none)."""
        from distributed import wait
        try:
            return wait(futures, timeout=timeout, return_when="FIRST_COMPLETED").done
        except TimeoutError:
            return set()

    def abandon(self, futures):
        """Cancel the tasks still running on the cluster."""
        self.client.cancel(futures)

    @property
    def workers_used(self) -> int:
        """How many workers returned a result."""
        return len(self._workers)

    def close(self):
        pass
