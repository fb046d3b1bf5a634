"""Moved to seckill/drivers/connect.py (the package's layers: clients/python/README.md, "Layout").
This path stays for the code and documents that name it: it is that module."""

import sys

from .drivers import connect

sys.modules[__name__] = connect
