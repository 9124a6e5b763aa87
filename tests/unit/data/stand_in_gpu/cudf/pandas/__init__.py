"""Stand-in cudf.pandas: ``install`` marks it loaded; every object reads as a proxy."""

LOADED = False


def install() -> None:
    global LOADED
    LOADED = True


def is_proxy_object(obj: object) -> bool:
    return LOADED
