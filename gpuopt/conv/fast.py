"""Old name of :mod:`.winograd` (modules are named by technique; "fast" is the precision class, see docs/glossary.md)."""

from .winograd import *  # noqa: F401,F403  (re-export only: registers nothing new)
from .winograd import ERROR_BOUNDS, TILES, __all__  # noqa: F401
