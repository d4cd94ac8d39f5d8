"""tomllib on Python 3.11+, tomli before it (same API)."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on the 3.8 CI leg
    import tomli as tomllib

__all__ = ["tomllib"]
