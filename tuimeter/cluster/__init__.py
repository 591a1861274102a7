"""``tuimeter cluster``: the energy of many nodes, read from Prometheus (headless parts).

Each node runs ``tuimeter record --host NAME --tag KEY=VALUE --prometheus ...``; a
Prometheus (or Thanos, Mimir, VictoriaMetrics: the same query API) scrapes them; this
package reads the nodes' cumulative energy counters back through the HTTP API
(:mod:`.promapi`), makes each remote (node, domain) a domain of the engine named
``NODE/DOMAIN`` (:mod:`.source`), and records or shows them. :mod:`.options` declares
every option (name, type, default, environment variable, config key) in one list.

This package never imports the UI (tests/test_layering.py, import-linter); the views
live in :mod:`tuimeter.tui.cluster_screen`. This ``__init__`` imports nothing, so that
:mod:`tuimeter.config` can read :mod:`.options` (a leaf) without a cycle.
"""
