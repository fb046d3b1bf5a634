"""Moved to seckill/drivers/aio_soldout.py (the package's layers: clients/python/README.md, "Layout").
This path stays for the code and documents that name it: it is that module."""

import sys

from ..drivers import aio_soldout

sys.modules[__name__] = aio_soldout
