"""Old name of :mod:`.tiled` and :mod:`.constmem` (modules are named by technique; the report is each variant's
``report``)."""

from .constmem import *  # noqa: F401,F403  (re-export only: registers nothing new)
from .tiled import *  # noqa: F401,F403
from .tiled import CHANNELS_PER_BLOCK, TILE_WIDTHS, __all__  # noqa: F401
