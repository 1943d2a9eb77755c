"""FedGCN (Yao et al.) reproduced on flowergraph: accuracy and communication on Cora and CiteSeer (``accuracy.py``),
the pre-training phase in plaintext and under CKKS (``he.py``) and against graph size and cross-client edges
(``scale.py``), and FedGCN side by side with the fedgraph library (``vs_fedgraph.py``)."""
