"""The one error a scenario file can raise while it is read and checked."""


class ScenarioError(ValueError):
    """A scenario that cannot be built; str() is the one-line message."""


def fail(key: str, reason: str):
    """Raise the error naming the key (`table.key`) and the reason."""
    raise ScenarioError(f"{key}: {reason}")
