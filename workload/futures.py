"""The one synchronisation primitive of rank programs: a value that
becomes available once, with callbacks, and generator-driven processes
that wait on it (a rank program yields what it waits for)."""
from __future__ import annotations


class Future:
    __slots__ = ("done", "value", "_callbacks")

    def __init__(self):
        self.done = False
        self.value = None
        self._callbacks = []

    def resolve(self, value=None) -> None:
        if self.done:
            raise RuntimeError("a future resolves once")
        self.done, self.value = True, value
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(value)

    def then(self, fn) -> None:
        """fn(value) once resolved (now, if it is)."""
        if self.done:
            fn(self.value)
        else:
            self._callbacks.append(fn)


def all_of(futures) -> Future:
    """Resolves (with the latest value) once every one of futures has."""
    out, pending = Future(), [len(futures)]
    if not futures:
        out.resolve(None)
        return out

    def one(value):
        pending[0] -= 1
        if pending[0] == 0:
            out.resolve(value)

    for f in futures:
        f.then(one)
    return out


class Process:
    """Runs a generator that yields Futures (or lists of them) and resumes
    it with each one's value; on_exit() when it returns."""

    def __init__(self, program, on_exit=None):
        self.program, self.on_exit = program, on_exit

    def start(self) -> None:
        self._resume(None)

    def _resume(self, value) -> None:
        while True:
            try:
                waited = self.program.send(value)
            except StopIteration:
                if self.on_exit is not None:
                    self.on_exit()
                return
            if isinstance(waited, (list, tuple)):
                waited = all_of(waited)
            if not waited.done:
                waited.then(self._resume)
                return
            value = waited.value
