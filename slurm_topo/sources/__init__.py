"""Location sources: a folder of node self-reports (``records``), a node's own record (``discover``) and
cloud instance listings (``providers``), each carrying its trust into the ``Inventory``.
"""
