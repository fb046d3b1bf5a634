"""The operations, each written once as a generator of plain steps
(seckill.plain.steps) over the plain rules: one sale key's (sale.py) and a
draw sale's (draw.py). The drivers (seckill.drivers) run them; the split
sale's operations are in seckill.split."""
