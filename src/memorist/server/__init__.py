"""The memory service (``memorist serve``): a REST API over :class:`~memorist.Memory`.

Needs the ``server`` extra (FastAPI, uvicorn). :func:`create_app` builds the
application; :class:`ServerLimits` bounds what a request may cost;
:class:`KeyStore` keeps the API keys (hashes only) in the store's SQLite file.
The contract the routes keep is docs/service-contract.md.
"""

from __future__ import annotations

from .app import create_app
from .keys import ApiKey, KeyStore
from .limits import ServerLimits

__all__ = ["ApiKey", "KeyStore", "ServerLimits", "create_app"]
