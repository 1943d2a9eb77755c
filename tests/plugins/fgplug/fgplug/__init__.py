"""A plugin package for flowergraph (tests): ``plug-avg`` on node classification, ``plug-graph`` on graph
classification. It imports only flowergraph's documented public API."""
