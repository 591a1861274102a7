"""tuimeter's version, in a leaf module: the modules that name it (the User-Agent of a
live carbon fetch, ``--version``, ``doctor``) import it from here, not from the package,
whose ``__init__`` imports the API lazily (that would close a circle through it)."""

__version__ = "0.1.0"

#: the session CSV's schema version (tuimeter.session.schema writes it; a node's
#: ``tuimeter_info`` series says it, so a cluster view knows what its recorder writes)
SCHEMA_VERSION = 3
