"""The API reference lists every route the server has."""
import os
import re

import yaml

from conftest import ROOT


def test_every_route_is_in_openapi():
    spec = yaml.safe_load(open(os.path.join(ROOT, "docs", "openapi.yaml")))
    router = open(os.path.join(ROOT, "fcgi", "router.c")).read()
    routes = re.findall(r'\{ "(GET|POST|PUT|DELETE|PATCH)", API "([^"]+)"', router)
    assert routes
    for method, path in routes:
        path = path.replace("{*}", "{path}")
        assert path in spec["paths"], path
        assert method.lower() in spec["paths"][path], (method, path)


def test_every_config_key_is_documented():
    doc = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    header = open(os.path.join(ROOT, "lib", "config.h")).read()
    keys = re.findall(r"^\s*X\((\w+),", header, re.M)
    assert len(keys) > 40
    for k in keys:
        assert f"`SANDBOX_{k}`" in doc, k
