"""Old name of :mod:`.unroll_jam` (modules are named by technique; the report is each variant's ``report``)."""

from .unroll_jam import *  # noqa: F401,F403  (re-export only: registers nothing new)
from .unroll_jam import BLOCK_SIZES, cs6235_plan, __all__  # noqa: F401
