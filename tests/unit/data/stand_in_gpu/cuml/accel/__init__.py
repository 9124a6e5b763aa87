"""Stand-in cuml.accel: ``install`` turns it on; it proxies no estimator."""

_ENABLED = False


def install() -> None:
    global _ENABLED
    _ENABLED = True


def enabled() -> bool:
    return _ENABLED
