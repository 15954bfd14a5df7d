"""The service's routes: one APIRouter module per resource, each route acting through
what the request reaches (deps.Reach), never through the caller itself: the scope
rule lives in deps.Reach alone."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

from fastapi.routing import APIRoute

from memorist.server import routes
from memorist.server.deps import Reach
from memorist.server.routes import ROUTERS

MODULES = [m.name for m in pkgutil.iter_modules(routes.__path__) if m.name != "params"]


def test_each_resource_module_has_one_router_and_the_app_includes_them_all() -> None:
    assert sorted(MODULES) == ["health", "memories", "minutes", "playbooks", "relations", "tiers", "trajectories"]
    assert {id(importlib.import_module(f"memorist.server.routes.{m}").router) for m in MODULES} == {id(r) for r in ROUTERS}


def test_no_route_applies_the_scope_rule_itself() -> None:
    for name in MODULES:
        source = inspect.getsource(importlib.import_module(f"memorist.server.routes.{name}"))
        assert not re.search(r"\b(caller|Caller|CallerDep|request_service)\b", source), name


def test_every_api_route_acts_through_reach() -> None:
    for router in ROUTERS:
        for route in router.routes:
            assert isinstance(route, APIRoute)
            if route.path.startswith("/api/"):
                hints = inspect.signature(route.endpoint, eval_str=True).parameters
                assert any(getattr(p.annotation, "__origin__", None) is Reach for p in hints.values()), route.path
