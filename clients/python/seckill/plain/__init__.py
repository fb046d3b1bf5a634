"""The plain layer: the rules, with no I/O, each tested without a server.

The wire protocol (protocol.py), draw sales (draw.py), the split sale's
protocol and audit (split_protocol.py, split_audit.py), the local sold-out
flag's rules (soldout.py), the WAIT gate (durability.py), which errors are
transient (errors.py), crash points (faults.py), and the steps an
operation yields (steps.py). Nothing here imports the rest of the package.
(seckill/backend.py, plain too, keeps its path: the integration tests read
its source.)
"""
