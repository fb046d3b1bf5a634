"""Moved to seckill/plain/protocol.py (the package's layers: clients/python/README.md, "Layout").
This path stays for the code and documents that name it: it is that module."""

import sys

from .plain import protocol

sys.modules[__name__] = protocol
