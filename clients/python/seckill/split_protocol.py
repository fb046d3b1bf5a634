"""Moved to seckill/plain/split_protocol.py (the package's layers: clients/python/README.md, "Layout").
This path stays for the code and documents that name it: it is that module."""

import sys

from .plain import split_protocol

sys.modules[__name__] = split_protocol
