"""Corpus helpers using 3.11+ syntax (imported only on 3.11+)."""


def except_star():
    """``try``/``except*`` with handlers that match parts of a group, and an unmatched rest."""
    log = []
    try:
        raise ExceptionGroup("eg", [ValueError("v1"), TypeError("t1"), ValueError("v2")])
    except* ValueError as group:
        log.append(("value", [str(e) for e in group.exceptions]))
    except* TypeError as group:
        log.append(("type", [str(e) for e in group.exceptions]))
    try:
        try:
            raise ExceptionGroup("eg", [KeyError("k"), OSError("o")])
        except* KeyError:
            log.append("key handled")
    except ExceptionGroup as rest:
        log.append(("rest", [type(e).__name__ for e in rest.exceptions]))
    return log
