"""The memory service (``memorist serve``): a REST API over :class:`~memorist.Memory`.

Needs the ``server`` extra (FastAPI, uvicorn). :func:`create_app` builds the
application; :class:`ServerLimits` bounds what a request may cost;
:class:`KeyStore` keeps the API keys (hashes only) in the store's SQLite file.
The contract the routes keep is docs/service-contract.md.
"""

from __future__ import annotations

from ..errors import MissingDependencyError

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # only without the extra
    raise MissingDependencyError(f'the memory service needs the server extra ({exc.name} is missing): pip install "memorist[server]"') from exc

from .app import create_app  # noqa: E402
from .keys import ApiKey, KeyStore  # noqa: E402
from .limits import ServerLimits  # noqa: E402

__all__ = ["ApiKey", "KeyStore", "ServerLimits", "create_app"]
