"""One module per kernel output format; each has parse(text, kernel, params) -> list of records.

A record is {"kernel": str, "params": dict, "metric": str, "value": float, "unit": str}.
"""


def record(kernel, params, metric, value, unit, **extra):
    return {"kernel": kernel, "params": dict(params, **extra), "metric": metric, "value": float(value), "unit": unit}
