"""The one error a scenario file can raise while it is read and checked,
and the checks of single values and tables that raise it."""


class ScenarioError(ValueError):
    """A scenario that cannot be built; str() is the one-line message."""


def fail(key: str, reason: str):
    """Raise the error naming the key (`table.key`) and the reason."""
    raise ScenarioError(f"{key}: {reason}")


def check_table(key: str, table, known, what: str = "a table") -> dict:
    """table, checked to be a table (`what` says which) whose keys are all
    among `known`, named in that order; key "" is the file's top level."""
    if not isinstance(table, dict):
        fail(key, f"must be {what}")
    for k in table:
        if k not in known:
            fail(f"{key}.{k}" if key else k, f"unknown key (known: {', '.join(known)})")
    return table


def integer(key: str, value, low: int = 0, high: int | None = None) -> int:
    # TOML booleans are ints to Python; never accept them as numbers.
    if isinstance(value, bool) or not isinstance(value, int):
        fail(key, f"expected an integer, got {type(value).__name__} {value!r}")
    if value < low or high is not None and value > high:
        fail(key, f"must be {low}..{high}, got {value}" if high is not None else f"must be >= {low}, got {value}")
    return value


def number(key: str, value, low: float = 0.0, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(key, f"expected a number, got {type(value).__name__} {value!r}")
    if value < low or high is not None and value > high:
        fail(key, f"must be {low:g}..{high:g}, got {value}" if high is not None else f"must be >= {low:g}, got {value}")
    return float(value)
