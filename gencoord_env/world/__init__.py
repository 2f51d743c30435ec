"""World backends behind one interface (``types.World``): the pure-Python ``sim`` and ``minecraft``."""
